"""Program-to-program passes (installed as `bril.passes`)."""
