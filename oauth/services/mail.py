"""Sending BTP's sign-in mails: over SMTP when BTP_MAIL_URL is set, else into an outbox directory of .eml files.

`smtp://[user:pass@]host[:port]` uses STARTTLS whenever the server offers it, and plain text only to a loopback
host: anywhere else sending fails with MailError rather than leak the mail or the credentials. `smtps://` is
implicit TLS. Certificates are verified against the system CAs. The outbox is private (0700, files 0600); a mail
holds a sign-in link, a credential, so it is never logged.
"""
from __future__ import annotations

import ipaddress
import logging
import os
import re
import secrets
import smtplib
import ssl
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid, parseaddr
from pathlib import Path
from urllib.parse import unquote, urlsplit

log = logging.getLogger(__name__)

TIMEOUT = 10
DEFAULT_PORTS = {"smtp": 587, "smtps": 465}
MAX_LINE = 998  # RFC 5321 line limit, CRLF excluded
MAX_ADDRESS, MAX_LOCAL = 254, 64  # RFC 5321 §4.5.3.1: a path of 256 octets with its brackets; a local part of 64
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_DOT_STRING = re.compile(rf"{_ATOM}(?:\.{_ATOM})*")
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_URL_FORM = "BTP_MAIL_URL must look like smtp[s]://[user:password@]host[:port] (percent-encode special characters)"


class MailError(RuntimeError):
    """Delivery failed (SMTP or outbox). The message names host:port or the outbox and the kind of failure,
    never credentials or the mail body."""


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str
    port: int
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)


@dataclass
class MailConfig:
    url: str | None = field(repr=False)  # may hold a password
    outbox_dir: Path
    sender: str
    target: _Target | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self):
        self.url = (self.url or "").strip() or None
        self.outbox_dir = Path(self.outbox_dir)
        if _has_control(self.sender) or "@" not in parseaddr(self.sender)[1]:
            raise ValueError("mail sender must be an e-mail address, optionally with a display name")
        self.target = parse_mail_url(self.url) if self.url else None


def parse_mail_url(url: str) -> _Target:
    """Raises ValueError (without echoing the URL, which may hold a password) when it is malformed."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError(_URL_FORM) from None
    if parts.scheme not in DEFAULT_PORTS:
        raise ValueError("BTP_MAIL_URL scheme must be smtp or smtps")
    if not parts.hostname or parts.path.strip("/") or parts.query or parts.fragment or port == 0:
        raise ValueError(_URL_FORM)
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    if (user is None) != (password is None) or user == "":
        raise ValueError("BTP_MAIL_URL needs both a user and a password, or neither")
    return _Target(parts.scheme, parts.hostname, port or DEFAULT_PORTS[parts.scheme], user, password)


def _has_control(value: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 or c in "\u2028\u2029\x85" for c in value)


def check_address(to: str) -> str:
    """`to` when it is an address this mailer sends to, else ValueError: RFC 5321's Mailbox with a Dot-string local
    part (§4.1.2: atoms of letters, digits and ``!#$%&'*+/=?^_`{|}~-`` joined by single dots, at most 64 characters,
    §4.5.3.1.1) and a fully qualified domain name (§2.3.5: two labels or more, of letters, digits and inner hyphens,
    at most 63 characters each, the last not all digits, RFC 3696 §2), 254 characters in all. Refused: a quoted
    local part, an address literal (``x@[127.0.0.1]``: a relay would deliver wherever the asker says) and any
    non-ASCII character, since the mailer never asks a relay for SMTPUTF8 (RFC 6531): an international domain is
    written in its A-label (``xn--``) form."""
    local, _, domain = to.rpartition("@") if isinstance(to, str) else ("", "", "")
    labels = domain.split(".")
    if (
        not isinstance(to, str) or not to.isascii() or len(to) > MAX_ADDRESS or len(local) > MAX_LOCAL or not _DOT_STRING.fullmatch(local)
        or len(labels) < 2 or not all(_LABEL.fullmatch(label) for label in labels) or labels[-1].isdigit()
        or parseaddr(to) != ("", to)
    ):
        raise ValueError("recipient must be a single plain e-mail address")
    return to


def build_message(config: MailConfig, to: str, subject: str, text: str, *, eight_bit: bool = False) -> EmailMessage:
    check_address(to)
    if _has_control(subject):
        raise ValueError("mail subject must not contain line breaks or control characters")
    msg = EmailMessage()
    msg["From"] = config.sender
    msg["To"] = to
    msg["Subject"] = subject
    msg["Date"] = format_datetime(datetime.now(timezone.utc))
    msg["Message-ID"] = make_msgid(domain=parseaddr(config.sender)[1].rpartition("@")[2] or "btp.invalid")
    short = all(len(line) <= MAX_LINE for line in text.encode().splitlines())
    if short and text.isascii():
        cte = "7bit"
    else:  # 8bit keeps links readable in the outbox; SMTP gets 7-bit-safe quoted-printable
        cte = "8bit" if short and eight_bit else "quoted-printable"
    msg.set_content(text, charset="utf-8", cte=cte)
    return msg


def send_mail(config: MailConfig, to: str, subject: str, text: str) -> None:
    """Send one text/plain UTF-8 mail. ValueError for a bad recipient or subject, MailError when sending fails."""
    if config.target is None:
        msg = build_message(config, to, subject, text, eight_bit=True)
        try:
            path = write_outbox(config.outbox_dir, msg)
        except OSError as exc:
            raise MailError(f"writing mail to outbox {config.outbox_dir} failed: {exc}") from exc
        log.info("mail to %s written to %s", to, path)
    else:
        _send_smtp(config.target, build_message(config, to, subject, text))


def write_outbox(outbox_dir: Path, msg: EmailMessage) -> Path:
    if not outbox_dir.is_dir():
        outbox_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(outbox_dir, 0o700)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    path = outbox_dir / f"{stamp}-{secrets.token_hex(4)}.eml"
    fd, tmp = tempfile.mkstemp(dir=outbox_dir, prefix=".", suffix=".tmp")  # mkstemp creates files 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(msg.as_bytes())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()


def _send_smtp(target: _Target, msg: EmailMessage) -> None:
    where = f"{target.host}:{target.port}"
    try:
        if target.scheme == "smtps":
            smtp = smtplib.SMTP_SSL(target.host, target.port, timeout=TIMEOUT, context=tls_context())
        else:
            smtp = smtplib.SMTP(target.host, target.port, timeout=TIMEOUT)
        with smtp:
            if target.scheme == "smtp":
                smtp.ehlo()
                if smtp.has_extn("starttls"):
                    smtp.starttls(context=tls_context())
                    smtp.ehlo()
                elif not _is_loopback(target.host):
                    raise MailError(f"mail server {where} does not offer STARTTLS; refusing to send in plain text")
            if target.user is not None:
                smtp.login(target.user, target.password)
            smtp.send_message(msg, from_addr=parseaddr(msg["From"])[1], to_addrs=[msg["To"]])
    except MailError:
        raise
    except (smtplib.SMTPException, OSError) as exc:  # ssl.SSLError and timeouts are OSErrors
        detail = _redact(str(exc), target)
        raise MailError(f"sending mail via {where} failed: {type(exc).__name__}: {detail}") from None


def _redact(text: str, target: _Target) -> str:
    return text.replace(target.password, "***") if target.password else text
