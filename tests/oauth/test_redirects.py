"""Redirect URI rules (oauth.kernel.redirects): what may be registered, how a requested URI matches, what is warned about."""
import pytest

from oauth.kernel.redirects import check_redirect_uri, is_loopback_or_app, redirect_matches

ACCEPTED = [
    "https://claude.ai/api/mcp/auth_callback",
    "https://example.com",
    "https://example.com/",
    "https://example.com:8443/cb?x=1&y=2",
    "https://Example.COM/cb",
    "HTTPS://example.com/cb",
    "https://sub.domain.example.co.uk/a/b/c",
    "https://localhost/cb",
    "https://203.0.113.7/cb",
    "https://[2001:db8::1]:8443/cb",
    "http://127.0.0.1/cb",
    "http://127.0.0.1:5/cb",
    "http://127.0.0.1:65535/callback?x=1",
    "http://127.0.0.1",
    "http://127.0.0.1:33418",
    "http://[::1]/cb",
    "http://[::1]:8080/oauth/callback",
    "HTTP://127.0.0.1:5/cb",
    "cursor://anysphere.cursor-mcp/oauth/callback",
    "vscode://vscode.github-authentication/did-authenticate",
    "com.example.app:/oauth2redirect",
    "com.example.app:/cb",
    "com.googleusercontent.apps.123:/oauth",
    "my-app+dev.v2://cb",
    "x" * 1 + "app:/" + "p" * (2000 - 9),
]

REFUSED = [
    ("https://example.com#x", "fragment"),
    ("https://example.com/cb#", "fragment"),
    ("http://127.0.0.1:5/cb#frag", "fragment"),
    ("cursor://anysphere.cursor-mcp/cb#x", "fragment"),
    ("http://localhost:3000/cb", "http other"),
    ("http://localhost/cb", "http other"),
    ("http://127.0.0.1.evil.com/cb", "http other"),
    ("http://127.0.0.1.nip.io/cb", "http other"),
    ("http://127.0.0.2/cb", "http other"),
    ("http://[::2]/cb", "http other"),
    ("http://[0:0:0:0:0:0:0:1]/cb", "http other"),
    ("http://0x7f000001/cb", "http other"),
    ("http://2130706433/cb", "http other"),
    ("http://example.com/cb", "http other"),
    ("http://127.0.0.1@evil.com/cb", "http other"),
    ("http://evil.com@127.0.0.1/cb", "http other"),
    ("http://127.0.0.1:80@evil.com/cb", "http other"),
    ("http://127.0.0.1:0/cb", "bad port"),
    ("http://127.0.0.1:70000/cb", "bad port"),
    ("http://127.0.0.1:/cb", "http other"),
    ("http:/127.0.0.1/cb", "http other"),
    ("https://user:pass@example.com/cb", "userinfo"),
    ("https://user@example.com/cb", "userinfo"),
    ("https://example.com@evil.com/cb", "userinfo"),
    ("myapp://user@host/cb", "userinfo"),
    ("https:///cb", "https without a host"),
    ("https:example.com/cb", "https without a host"),
    ("https://", "https without a host"),
    ("https://exa mple.com/cb", "whitespace"),
    ("https://example.com/c b", "whitespace"),
    (" https://example.com/cb", "whitespace"),
    ("https://example.com/cb\n", "whitespace"),
    ("https://example.com/cb\t", "whitespace"),
    ("https://example.com/\x00", "whitespace"),
    ("https://example.com/\x7f", "whitespace"),
    ("https://exämple.com/cb", "non-ASCII"),
    ("https://example.com/\u00a0", "non-ASCII"),
    ("https://good.example\\@evil.example/", "character"),
    ("https://example.com/<script>", "character"),
    ("https://example.com:99999/cb", "bad port"),
    ("https://example.com:abc/cb", "bad port"),
    ("https://[::1/cb", "bad IPv6"),
    ("https://[zz::1]/cb", "bad IPv6"),
    ("https://-bad-.example/cb", "bad host"),
    ("https://a..b/cb", "bad host"),
    ("https://" + "a" * 64 + ".example/cb", "bad host"),
    ("javascript:alert(1)", "scheme"),
    ("JavaScript:alert(1)", "scheme"),
    ("data:text/html,<b>hi</b>", "character"),
    ("data:text/html;base64,PGI+", "scheme"),
    ("file:///etc/passwd", "scheme"),
    ("ftp://example.com/cb", "scheme"),
    ("ws://127.0.0.1/cb", "scheme"),
    ("wss://example.com/cb", "scheme"),
    ("about:blank", "scheme"),
    ("blob:https://example.com/uuid", "scheme"),
    ("vbscript:msgbox", "scheme"),
    ("mailto:a@example.com", "scheme"),
    ("view-source:https://example.com", "scheme"),
    ("intent://scan/#Intent;scheme=zxing;end", "fragment"),
    ("intent://scan/", "scheme"),
    ("1app://cb", "no scheme"),
    ("-app://cb", "no scheme"),
    ("app_x://cb", "no scheme"),
    ("://cb", "no scheme"),
    ("/relative/cb", "no scheme"),
    ("example.com/cb", "no scheme"),
    ("myapp:", "nothing after"),
    ("myapp:/", "nothing after"),
    ("myapp://", "nothing after"),
    ("", "empty"),
    ("https://example.com/" + "a" * 1981, "too long"),
]


@pytest.mark.parametrize("uri", ACCEPTED)
def test_accepted(uri):
    assert check_redirect_uri(uri) is None


@pytest.mark.parametrize("uri,reason", REFUSED)
def test_refused_with_a_reason(uri, reason):
    problem = check_redirect_uri(uri)
    assert problem is not None and reason.lower() in problem.lower(), problem


def test_length_limit_is_2000_characters():
    base = "https://example.com/"
    assert check_redirect_uri(base + "a" * (2000 - len(base))) is None
    assert check_redirect_uri(base + "a" * (2001 - len(base))) == "too long"


@pytest.mark.parametrize("value", [None, 42, b"https://example.com/cb", ["https://example.com/cb"]])
def test_non_strings_are_refused_not_raised(value):
    assert check_redirect_uri(value) is not None
    assert redirect_matches(["https://example.com/cb"], value) is False


@pytest.mark.parametrize("registered,requested,expected", [
    (["https://app.example/cb"], "https://app.example/cb", True),
    (["https://app.example/cb"], "https://app.example/cb/", False),
    (["https://app.example/cb"], "https://app.example/CB", False),
    (["https://app.example/cb"], "https://APP.example/cb", False),
    (["https://app.example/cb"], "HTTPS://app.example/cb", False),
    (["https://app.example/cb"], "https://app.example:443/cb", False),
    (["https://app.example/cb"], "https://app.example/cb?x=1", False),
    (["https://app.example/cb"], "https://app.example/cb#", False),
    (["https://app.example/cb"], "https://app.example/%63b", False),
    (["https://app.example:8443/cb"], "https://app.example:9443/cb", False),
    (["https://a.example/cb", "https://b.example/cb"], "https://b.example/cb", True),
    ([], "https://app.example/cb", False),
    (["http://127.0.0.1/callback"], "http://127.0.0.1:51234/callback", True),
    (["http://127.0.0.1:5000/callback"], "http://127.0.0.1:6000/callback", True),
    (["http://127.0.0.1:5000/callback"], "http://127.0.0.1/callback", True),
    (["http://[::1]/callback"], "http://[::1]:8080/callback", True),
    (["http://127.0.0.1/callback"], "http://[::1]:8080/callback", False),
    (["http://[::1]/callback"], "http://127.0.0.1:8080/callback", False),
    (["http://127.0.0.1/callback"], "http://127.0.0.1:8080/callback2", False),
    (["http://127.0.0.1/callback"], "http://127.0.0.1:8080/callback?x=1", False),
    (["http://127.0.0.1/callback?x=1"], "http://127.0.0.1:9/callback?x=1", True),
    (["http://127.0.0.1"], "http://127.0.0.1:9", True),
    (["http://127.0.0.1"], "http://127.0.0.1:9/", False),
    (["http://127.0.0.1/callback"], "http://127.0.0.1:0/callback", False),
    (["http://127.0.0.1/callback"], "http://127.0.0.1:8080/callback#x", False),
    (["http://127.0.0.1/callback"], "HTTP://127.0.0.1:8080/callback", False),
    (["HTTP://127.0.0.1/cb"], "HTTP://127.0.0.1:8080/cb", True),
    (["http://127.0.0.1/callback"], "http://localhost:8080/callback", False),
    (["http://localhost/callback"], "http://localhost/callback", False),
    (["http://127.0.0.1/callback"], "http://127.0.0.1.evil.com:80/callback", False),
    (["https://127.0.0.1/cb"], "https://127.0.0.1:8443/cb", False),
    (["cursor://anysphere.cursor-mcp/oauth/callback"], "cursor://anysphere.cursor-mcp/oauth/callback", True),
    (["cursor://anysphere.cursor-mcp/oauth/callback"], "cursor://anysphere.cursor-mcp:1/oauth/callback", False),
    (["javascript:alert(1)"], "javascript:alert(1)", False),
    (["https://app.example/cb#x"], "https://app.example/cb#x", False),
])
def test_redirect_matches(registered, requested, expected):
    assert redirect_matches(registered, requested) is expected


@pytest.mark.parametrize("uri,expected", [
    ("http://127.0.0.1:5000/cb", True),
    ("http://[::1]/cb", True),
    ("https://localhost/cb", True),
    ("https://app.localhost/cb", True),
    ("https://127.0.0.1:8443/cb", True),
    ("https://127.8.9.10/cb", True),
    ("https://[::1]/cb", True),
    ("cursor://anysphere.cursor-mcp/oauth/callback", True),
    ("com.example.app:/cb", True),
    ("javascript:alert(1)", True),
    ("https://claude.ai/api/mcp/auth_callback", False),
    ("https://example.com:8443/cb", False),
    ("https://203.0.113.7/cb", False),
    ("HTTPS://Example.com/cb", False),
])
def test_is_loopback_or_app(uri, expected):
    assert is_loopback_or_app(uri) is expected
