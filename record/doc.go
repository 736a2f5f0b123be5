// Package record owns the versioned JSON records on doclog's topics: the job
// a producer submits to doclog.jobs, the write-ready announcement an executor
// sends to doclog.write-ready for every committed job, and the dead letter it
// sends to doclog.dead-letters for a job that cannot succeed.
//
// These records are a public contract (docs/records.md, with a JSON Schema
// per record in docs/schemas): a producer that writes jobs with any Kafka
// client is as first-class as doclog's own ingest. So the encoders refuse to
// write a record that breaks the contract, and the decoders are strict: an
// unknown schema version, a missing required field, an unknown field,
// malformed JSON, an invalid action or an oversized record is a *DecodeError
// with a precise reason and the ErrorType a dead letter is classified by.
//
// Every record names its schema twice: in the Kafka record header
// doclog-schema and in its JSON "schema" field. The header lets a consumer
// route or reject a record without parsing it; the field keeps the version
// with the bytes wherever they are copied (a dead letter, a file, a log).
package record
