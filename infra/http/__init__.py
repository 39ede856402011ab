"""The HTTP admin API (``schedfence serve``): a thin FastAPI layer over the application service.

``app.create_app`` builds the app; ``auth`` reads the tokens file and decides who may call what
(``authorize``); ``errors`` maps the domain's error codes to HTTP statuses in one JSON shape;
``bodies`` holds the request bodies; ``reads``, ``schedules`` and ``operations`` the routes.
Nothing imports this package except the CLI's ``serve`` command.
"""
