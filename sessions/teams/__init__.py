"""People and what they may do: teams, roles, invitations, the approved server catalog, login sessions.

- ``models``: the data (``Team``, ``Membership``, ``Invitation``, ``CatalogServer``, ``LoginSession``).
- ``access``: who may see and do what; every query of a person's sessions, servers and recordings
  goes through a ``Scope``.
- ``team_models``: the team's own models for chats and evals, their keys encrypted, their URLs held to
  the egress rules (hosted).

In the local mode there is one person, the admin of a personal team made at their first login;
in the hosted mode (``INSPECTOR_HOSTED``) people have accounts and belong to teams with a role.
"""
