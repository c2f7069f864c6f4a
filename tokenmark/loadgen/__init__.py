"""The load generator: the asyncio runner that drives a system under test."""
