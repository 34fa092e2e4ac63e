"""A real OpenID Connect provider for the single sign-on tests: django-oauth-toolkit in a project of its own.

``python -m support.oidc_provider`` (with tests/ on the path) migrates a fresh SQLite file, registers one
confidential client (PKCE required) and people with passwords, then serves on 127.0.0.1 until stopped.
Its settings come from the environment (``settings.py``); its RSA signing key is made at start-up.
"""
