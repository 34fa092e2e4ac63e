"""The read side: what a recorded timeline says, from the database.

- ``queries``: timeline filters (the same on stored rows and live batches), pages of rows, one frame.
- ``calls`` and ``listings``: a request read back as a call card; what a server listed.
- ``conformance``: rules broken and latency by method; ``plots``: its latency and frame-rate plots;
  ``search`` across sessions; ``compare`` two.
- ``overview``: the Overview tab's ``capabilities`` table (declared, toggled, used) and
  ``lifecycle`` bar.
- ``recordings``: open a JSON Lines recording as a session; ``exports``: JSON Lines, HTML, collection.
"""
