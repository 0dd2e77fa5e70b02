"""oauth.services.mail: outbox files, header-injection refusal, SMTP (plain loopback, STARTTLS, SMTPS) and BTP_MAIL_URL parsing."""
import datetime
import ipaddress
import logging
import re
import socket
import ssl
import stat
from email import policy
from email.parser import BytesParser
from email.utils import parsedate_to_datetime

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from oauth.services import mail
from oauth.services.mail import MailConfig, MailError, parse_mail_url, send_mail

SENDER = "BTP <noreply@btp.example>"
TO = "ada@example.org"
PASSWORD = "p@ss:w/rd secret"
URL_PASSWORD = "p%40ss%3Aw%2Frd%20secret"
SUBJECT = "Dein Anmeldelink für BTP"
BODY = "Hallo Ådа,\n\nhttps://btp.example/login?token=SECRET-TOKEN-" + "x" * 120 + "\n\n— BTP ✓\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Handler:
    def __init__(self):
        self.received = []

    async def handle_DATA(self, server, session, envelope):
        self.received.append((session.authenticated, envelope))
        return "250 OK"


def authenticator(server, session, envelope, mechanism, auth_data):
    ok = (auth_data.login, auth_data.password) == (b"bob", PASSWORD.encode())
    return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd answers 535 itself


@pytest.fixture
def smtp_server():
    """Start aiosmtpd on 127.0.0.1 with the given TLS setup; yields (handler, port) via a factory."""
    controllers = []

    def start(**kwargs):
        handler, port = Handler(), free_port()
        controller = Controller(handler, hostname="127.0.0.1", port=port, authenticator=authenticator,
                                auth_require_tls=False, **kwargs)
        controller.start()
        controllers.append(controller)
        return handler, port

    yield start
    for controller in controllers:
        controller.stop()


@pytest.fixture(scope="module")
def tls_cert(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1: (server context, path of the PEM to trust)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "btp test smtp")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    d = tmp_path_factory.mktemp("tls")
    (d / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(d / "cert.pem", d / "key.pem")
    return server_ctx, d / "cert.pem"


def trust(monkeypatch, cafile):
    monkeypatch.setattr(mail, "tls_context", lambda: ssl.create_default_context(cafile=cafile))


def parse(raw: bytes):
    return BytesParser(policy=policy.default).parsebytes(raw.replace(b"\r\n", b"\n"))  # SMTP data is CRLF


# --- outbox mode -----------------------------------------------------------------------------------------------

def test_outbox_writes_private_eml_and_logs_no_body(tmp_path, caplog):
    outbox = tmp_path / "instance" / "outbox"
    caplog.set_level(logging.INFO, logger="oauth.services.mail")
    send_mail(MailConfig(None, outbox, SENDER), TO, SUBJECT, BODY)

    files = list(outbox.iterdir())
    assert len(files) == 1 and re.fullmatch(r"\d{8}T\d{12}Z-[0-9a-f]{8}\.eml", files[0].name)
    assert stat.S_IMODE(outbox.stat().st_mode) == 0o700
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    msg = parse(files[0].read_bytes())
    assert msg["From"] == SENDER and msg["To"] == TO and msg["Subject"] == SUBJECT
    assert parsedate_to_datetime(msg["Date"]).tzinfo is not None
    assert re.fullmatch(r"<[^<>@\s]+@btp\.example>", msg["Message-ID"])
    assert msg.get_content_type() == "text/plain" and msg.get_content_charset() == "utf-8"
    assert msg.get_content() == BODY
    assert b"SECRET-TOKEN-" in files[0].read_bytes()  # 8bit: the link stays readable for developers

    assert [r.levelname for r in caplog.records] == ["INFO"]
    assert TO in caplog.text and str(files[0]) in caplog.text
    assert "SECRET" not in caplog.text and "Hallo" not in caplog.text


def test_outbox_keeps_existing_directory_and_unique_names(tmp_path):
    config = MailConfig("", tmp_path, "noreply@btp.example")  # empty URL counts as unset
    for _ in range(3):
        send_mail(config, TO, "hi", "plain ascii\n")
    names = [p.name for p in tmp_path.iterdir()]
    assert len(names) == 3 and all(n.endswith(".eml") for n in names)  # no leftover temp files


def test_unwritable_outbox_is_mail_error(tmp_path):
    (tmp_path / "out").write_text("not a directory")
    with pytest.raises(MailError, match="outbox"):
        send_mail(MailConfig(None, tmp_path / "out", SENDER), TO, "hi", "body\n")


@pytest.mark.parametrize("to", [
    "ada@example.org\r\nBcc: eve@evil.example", "ada@example.org\n", "Ada <ada@example.org>",
    "ada@example.org, eve@evil.example", "ada@example.org;eve@evil.example", '"eve@evil"@example.org',
    "ada@example.org (eve@evil.example)", "ada", "@example.org", "ada@", "ada@@example.org", "ada @example.org",
    "ådä@example.org", "",
    # what this mailer does not send to (check_address): an address literal, SMTPUTF8, a quoted or dotted-wrong
    # local part, a domain that is no fully qualified name
    "x@[127.0.0.1]", "x@[IPv6:::1]", "é@ü.test", "a@ü.test", '"x"@example.org', "x@127.0.0.1", "x@localhost",
    ".x@example.org", "x.@example.org", "x..y@example.org", "x@-a.example", "x@a-.example", "x@a_b.example",
    "x@example..org", "x@example.org.", "x" * 65 + "@example.org", "x@" + "a" * 64 + ".example",
    "x@" + ("a" * 60 + ".") * 4 + "example.org",
])
def test_bad_recipients_refused(tmp_path, to):
    with pytest.raises(ValueError):
        send_mail(MailConfig(None, tmp_path / "out", SENDER), to, "hi", "body\n")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("to", ["o'brien+trips@example.org", "a{b}|c@example.org", "x@xn--bcher-kva.example",
                                "x@a.b.c1", "x" * 64 + "@" + "a" * 63 + ".example"])
def test_plain_recipients_of_every_shape_are_sent_to(tmp_path, to):
    send_mail(MailConfig(None, tmp_path / "out", SENDER), to, "hi", "body\n")
    (sent,) = (tmp_path / "out").iterdir()
    assert BytesParser(policy=policy.default).parsebytes(sent.read_bytes())["To"] == to


@pytest.mark.parametrize("subject", ["hi\r\nBcc: eve@evil.example", "hi\nthere", "hi\rthere", "a\x00b"])
def test_subject_with_line_breaks_refused(tmp_path, subject):
    with pytest.raises(ValueError):
        send_mail(MailConfig(None, tmp_path, SENDER), TO, subject, "body\n")


@pytest.mark.parametrize("sender", ["", "noreply", "x@y.example\r\nBcc: eve@evil.example"])
def test_bad_sender_refused(tmp_path, sender):
    with pytest.raises(ValueError):
        MailConfig(None, tmp_path, sender)


# --- SMTP mode ---------------------------------------------------------------------------------------------------

def test_smtp_plain_loopback_with_auth(smtp_server, tmp_path):
    handler, port = smtp_server()
    send_mail(MailConfig(f"smtp://bob:{URL_PASSWORD}@127.0.0.1:{port}", tmp_path, SENDER), TO, SUBJECT, BODY)
    [(authenticated, envelope)] = handler.received
    assert authenticated and envelope.mail_from == "noreply@btp.example" and envelope.rcpt_tos == [TO]
    msg = parse(envelope.original_content)
    assert msg["Subject"] == SUBJECT and msg["To"] == TO and msg.get_content() == BODY
    assert msg["Content-Transfer-Encoding"] == "quoted-printable"
    assert not list(tmp_path.iterdir())


def test_smtp_wrong_password_is_mail_error_without_password(smtp_server, tmp_path):
    _, port = smtp_server()
    with pytest.raises(MailError) as err:
        send_mail(MailConfig(f"smtp://bob:wrong-{URL_PASSWORD}@127.0.0.1:{port}", tmp_path, SENDER), TO, "x", "y")
    assert "Authentication" in str(err.value) and "secret" not in str(err.value)


def test_smtp_server_down_is_mail_error_without_password(tmp_path):
    url = f"smtp://bob:{URL_PASSWORD}@127.0.0.1:{free_port()}"
    with pytest.raises(MailError) as err:
        send_mail(MailConfig(url, tmp_path, SENDER), TO, "x", "y")
    text = str(err.value)
    assert "127.0.0.1" in text and "secret" not in text and URL_PASSWORD not in text
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_smtp_without_starttls_refused_off_loopback(smtp_server, tmp_path, monkeypatch):
    handler, port = smtp_server()
    monkeypatch.setattr(mail, "_is_loopback", lambda host: False)
    with pytest.raises(MailError, match="STARTTLS"):
        send_mail(MailConfig(f"smtp://bob:{URL_PASSWORD}@127.0.0.1:{port}", tmp_path, SENDER), TO, "x", "y")
    assert handler.received == []


def test_smtp_starttls_verified_then_auth(smtp_server, tls_cert, tmp_path, monkeypatch):
    server_ctx, cafile = tls_cert
    handler, port = smtp_server(tls_context=server_ctx, require_starttls=True)
    config = MailConfig(f"smtp://bob:{URL_PASSWORD}@127.0.0.1:{port}", tmp_path, SENDER)
    with pytest.raises(MailError, match="SSLCertVerificationError"):  # untrusted certificate: nothing sent
        send_mail(config, TO, "x", "y")
    trust(monkeypatch, cafile)
    send_mail(config, TO, SUBJECT, BODY)
    [(authenticated, envelope)] = handler.received
    assert authenticated and parse(envelope.original_content).get_content() == BODY


def test_smtps_implicit_tls(smtp_server, tls_cert, tmp_path, monkeypatch):
    server_ctx, cafile = tls_cert
    handler, port = smtp_server(ssl_context=server_ctx)
    trust(monkeypatch, cafile)
    send_mail(MailConfig(f"smtps://bob:{URL_PASSWORD}@127.0.0.1:{port}", tmp_path, SENDER), TO, SUBJECT, BODY)
    [(authenticated, envelope)] = handler.received
    assert authenticated and envelope.rcpt_tos == [TO]


# --- BTP_MAIL_URL parsing -------------------------------------------------------------------------------------

@pytest.mark.parametrize("url, expected", [
    ("smtp://mail.example", ("smtp", "mail.example", 587, None, None)),
    ("smtps://mail.example", ("smtps", "mail.example", 465, None, None)),
    ("smtp://mail.example:25/", ("smtp", "mail.example", 25, None, None)),
    (f"smtp://bob:{URL_PASSWORD}@Mail.Example:2525", ("smtp", "mail.example", 2525, "bob", PASSWORD)),
    ("smtps://a%2Bb%40c.example:x@[::1]", ("smtps", "::1", 465, "a+b@c.example", "x")),
])
def test_parse_mail_url(url, expected):
    t = parse_mail_url(url)
    assert (t.scheme, t.host, t.port, t.user, t.password) == expected
    assert "secret" not in repr(t)


@pytest.mark.parametrize("url", [
    "http://bob:secret@mail.example", "smtp://", "smtp://bob:secret@", "smtp://bob:secret@mail.example:99999",
    "smtp://bob:secret@mail.example:abc", "smtp://bob:se#cret@mail.example", "smtp://bob:secret/x@mail.example",
    "smtp://bob:secret@mail.example/path", "smtp://bob:secret@mail.example?x=1", "smtp://bob@mail.example",
    "smtp://:secret@mail.example", "mail.example:25",
])
def test_malformed_url_raises_without_password(tmp_path, url):
    with pytest.raises(ValueError) as err:
        MailConfig(url, tmp_path, SENDER)
    assert "secret" not in str(err.value) and "cret" not in str(err.value)


def test_config_repr_hides_url(tmp_path):
    assert "secret" not in repr(MailConfig(f"smtp://bob:{URL_PASSWORD}@mail.example", tmp_path, SENDER))
