"""Storage (`delta_ops.storage`): the local disk and object-store servers on loopback (moto, Azurite, a GCS emulator)."""
