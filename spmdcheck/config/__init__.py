"""Configuration: the config files of a project, resolved per checked file (resolve), and the project
helpers they declare, written out as stubs (helper_stubs)."""
