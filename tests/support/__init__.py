"""Test infrastructure shared by integration tests: loopback servers, a scriptable upstream."""
