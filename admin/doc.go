// Package admin holds the operations behind doclogctl, each a function over
// the stages' own interfaces (the log's Store, the model registry, Kafka
// clients), so the CLI stays a thin layer of flags and output and every
// operation is testable without it.
package admin
