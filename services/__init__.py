"""The domain: plain values in, plain values or DomainErrors out; no HTTP objects, no SQL."""
