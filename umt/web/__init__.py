"""``umt web``: a live dashboard of the database the CLI uses, served by Starlette on uvicorn.

Pages are rendered on the server (Jinja2, autoescaped) and readable without JavaScript; a little
plain JS refreshes the live part of a page when the server pushes a change (Server-Sent Events,
fed by the engine's own wake-ups). Actions go through ``umt.app.App`` like the CLI's.
"""
