// Package apitest holds the API contract test: schemathesis, the OpenAPI
// property-based tester, generates requests from the OpenAPI documents that
// ingest and the read store serve and checks every answer against them, with
// both APIs running as `doclog serve` runs them, against a real Postgres and
// Kafka (docs/testing.md). The package has no code of its own.
package apitest
