"""Systems under test: adapters that implement tokenmark.sut.SystemUnderTest."""
