"""An example dg project: a lake's maintenance declared in ``defs/lake/defs.yaml``."""
