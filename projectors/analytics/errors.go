package analytics

import "fmt"

// ConfigError reports a Config setting that cannot work.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("analytics config: %s %s", e.Field, e.Reason)
}

// SchemaError reports a DDL statement ClickHouse refused while the schema
// was being created.
type SchemaError struct {
	// Object is the database or table the statement creates.
	Object string
	Err    error
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("create clickhouse %s: %v", e.Object, e.Err)
}

func (e *SchemaError) Unwrap() error { return e.Err }

// InsertError reports a batch ClickHouse refused or did not acknowledge.
// Returned from Apply, it rolls the runner's Postgres transaction back, so
// the checkpoint stays put and the batch is retried; rows ClickHouse may
// have stored anyway are absorbed by ReplacingMergeTree on the retry.
type InsertError struct {
	Table string
	Rows  int
	Err   error
}

func (e *InsertError) Error() string {
	return fmt.Sprintf("insert %d rows into clickhouse table %s: %v", e.Rows, e.Table, e.Err)
}

func (e *InsertError) Unwrap() error { return e.Err }
