package analytics

import (
	"context"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Table names in the configured database.
const (
	TableOperations = "operations"
	TableDocuments  = "documents"
)

// The column lists are written once and used by both the DDL and the
// INSERTs, which name their columns explicitly: a column added later (with a
// default) then never shifts what an older binary inserts.
var (
	operationColumns = []column{
		{"document_id", "String"},
		{"scope", "String"},
		{"branch", "String"},
		{"idx", "Int64"},
		{"op_id", "String"},
		{"job_id", "String"},
		{"document_type", "String"},
		{"skip", "Int64"},
		{"hash", "String"},
		{"model_version", "Int32"},
		{"timestamp_utc_ms", "Int64"},
		{"action_id", "String"},
		{"action_type", "String"},
		{"action_json", "String"},
		// The version of ReplacingMergeTree: UInt64 is accepted as a
		// version column by every server release.
		{"ordinal", "UInt64"},
		// 0 when the operation arrived without its commit time.
		{"written_at_utc_ms", "Int64"},
		{"inserted_at_utc_ms", "Int64"},
	}
	documentColumns = []column{
		{"document_id", "String"},
		{"branch", "String"},
		{"document_type", "String"},
		{"name", "String"},
		{"slug", "String"},
		{"model_version", "Int32"},
		{"created_at_utc_ms", "Int64"},
		{"last_modified_utc_ms", "Int64"},
		{"is_deleted", "UInt8"},
		{"deleted_at_utc_ms", "Int64"},
		{"revision_document", "Int64"},
		{"revision_global", "Int64"},
		{"revision_local", "Int64"},
		// The version of ReplacingMergeTree: the number of operations of
		// the document on the branch, which every change raises.
		{"operation_count", "UInt64"},
		{"last_ordinal", "UInt64"},
		{"inserted_at_utc_ms", "Int64"},
	}
)

type column struct{ name, typ string }

func columnList(cols []column) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

func createTable(database, table string, cols []column, engine string) string {
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS " + database + "." + table + " (\n")
	for i, c := range cols {
		b.WriteString("    " + c.name + " " + c.typ)
		if i < len(cols)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString(") " + engine)
	return b.String()
}

// Statements returns the DDL of the analytics tables in database, in the
// order EnsureSchema runs it. Every statement is idempotent and written in
// the subset ClickHouse 18.16 and current releases share: the
// "ENGINE = ... ORDER BY" syntax, no PARTITION BY (a single partition: a
// time partition key taken from client timestamps could make one insert
// span more partitions than a server accepts), plain types (no
// LowCardinality, DateTime64 or Nullable; times are epoch milliseconds in
// Int64), no column DEFAULTs or codecs.
func Statements(database string) []string {
	return []string{
		// Operations are identified by their position in the log: a
		// re-delivered or re-inserted operation has the same key and the
		// same ordinal, and merges collapse the copies.
		createTable(database, TableOperations, operationColumns,
			"ENGINE = ReplacingMergeTree(ordinal) ORDER BY (document_id, scope, branch, idx)"),
		createTable(database, TableDocuments, documentColumns,
			"ENGINE = ReplacingMergeTree(operation_count) ORDER BY (document_id, branch)"),
	}
}

// EnsureSchema creates the database (when create is set) and the tables,
// leaving existing ones as they are.
func EnsureSchema(ctx context.Context, conn driver.Conn, database string, create bool) error {
	if create {
		if err := conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+database); err != nil {
			return &SchemaError{Object: "database " + database, Err: err}
		}
	}
	tables := []string{TableOperations, TableDocuments}
	for i, stmt := range Statements(database) {
		if err := conn.Exec(ctx, stmt); err != nil {
			return &SchemaError{Object: "table " + database + "." + tables[i], Err: err}
		}
	}
	return nil
}
