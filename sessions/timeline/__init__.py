"""The read side: what a recorded timeline says, from the database.

- ``queries``: timeline filters (the same on stored rows and live batches), pages of rows, one frame.
- ``calls`` and ``listings``: a request read back as a call card; what a server listed.
- ``conformance``: rules broken and latency by method; ``search`` across sessions; ``compare`` two.
- ``recordings``: open a JSON Lines recording as a session; ``exports``: JSON Lines, HTML, collection.
"""
