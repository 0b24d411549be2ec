// Arbiter dashboard: small progressive enhancements on top of htmx.
