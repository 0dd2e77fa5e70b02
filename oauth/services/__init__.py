"""oauth's use cases: the authorization server, accounts, sign-in mail, consent, client registration."""
