"""The command line, one module per command: each parses its options, calls the core and renders.
`options.py` holds the deployment options they share; `cli.py` assembles the app from them."""
