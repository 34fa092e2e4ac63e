"""The web: views per feature, the session page's live consumer and fragments, forms, and shortcuts.

Views and consumers read the database through ``sessions.timeline`` and reach live connections
only through ``sessions.runtime.client``'s typed commands. Templates under templates/ mirror these
modules (``sessions/panels/<panel>.html``, ``sessions/tools/``, ``sessions/reviews/``, …).
"""
