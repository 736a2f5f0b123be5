// Package analytics is the ClickHouse projector: it keeps an operations
// table (one row per operation of the log) and a documents table (one row
// per document and branch: header, deletion, revision per scope) in step with
// the write-ready topic, for analytical queries the Postgres read tables are
// not built for. See docs/analytics.md for the tables and sample queries.
//
// It runs under the shared projector runner (package projectors) as its own
// consumer group. The runner verifies every operation against its hash and
// keeps the stream heads and the partition checkpoint in Postgres; this
// package only turns verified changes into ClickHouse rows and never talks to
// Postgres itself.
//
// Delivery: Apply inserts into ClickHouse inside the runner's batch, before
// the Postgres transaction that moves the checkpoint commits. ClickHouse
// cannot join that transaction, so the two commits are ordered instead:
//   - ClickHouse acknowledged, Postgres committed: the normal case.
//   - ClickHouse failed: Apply returns an error, the Postgres transaction
//     rolls back, the runner retries the batch; nothing is lost.
//   - ClickHouse acknowledged, then Postgres failed (or the process died
//     before committing): the checkpoint did not move, so the batch is
//     delivered again and its rows are inserted a second time.
//
// The third case is why both tables are ReplacingMergeTree keyed by what
// identifies a row in the log (the operation's stream and index; the
// document and branch) and versioned by a number a later state always
// raises (the operation's ordinal; the document's operation count): copies
// describe the same operation or the same document state (they differ at
// most in inserted_at_utc_ms, and an operation that first came from a record
// without its ordinal carries 0 there) and merges keep one, the highest
// version. Merges happen in the background, so
// until then a table may hold copies, and every count reads it with FINAL or
// counts distinct keys with uniqExact. The order also means ClickHouse may
// briefly be ahead of the checkpoint, never behind it.
package analytics

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/projectors"
)

// Projector writes the analytics tables. It follows every scope. Create it
// with New, run it with a projectors.Runner configured by RunnerConfig, and
// Close it after the runner.
type Projector struct {
	cfg Config
	// gen is the generation whose tables it writes and reads; "" for the
	// live tables.
	gen    string
	conn   driver.Conn
	logger *zap.Logger
	m      *metrics
	now    func() time.Time
}

var (
	_ projectors.GenerationTables = (*Projector)(nil)
	_ projectors.RunnerConfigurer = (*Projector)(nil)
)

// New validates cfg, connects to ClickHouse and creates the schema if it is
// missing. logger may be nil.
func New(ctx context.Context, cfg Config, logger *zap.Logger) (*Projector, error) {
	cfg = cfg.WithDefaults()
	// Every statement names the database, so the session's default only
	// matters at the handshake, which fails when the database is missing:
	// leave it to the server when the projector is to create it.
	session := cfg.Database
	if cfg.CreateDatabase {
		session = ""
	}
	p, err := open(ctx, cfg, session, logger)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout+cfg.InsertTimeout)
	defer cancel()
	if err := EnsureSchema(ctx, p.conn, cfg.Database, cfg.CreateDatabase); err != nil {
		_ = p.conn.Close()
		return nil, err
	}
	return p, nil
}

// NewReader connects to ClickHouse for the read functions only
// (OperationCounts, DocumentSummaries): it creates nothing, so a user
// allowed only to read the tables can verify them. Apply must not be called
// on it.
func NewReader(ctx context.Context, cfg Config) (*Projector, error) {
	cfg = cfg.WithDefaults()
	return open(ctx, cfg, cfg.Database, nil)
}

// open validates cfg (with its defaults), connects and pings.
func open(ctx context.Context, cfg Config, session string, logger *zap.Logger) (*Projector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:        cfg.Addr,
		Auth:        clickhouse.Auth{Database: session, Username: cfg.Username, Password: cfg.Password},
		TLS:         cfg.TLS,
		DialTimeout: cfg.DialTimeout,
		ClientInfo: clickhouse.ClientInfo{Products: []struct{ Name, Version string }{
			{Name: "doclog-analytics", Version: "1"},
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("connect to clickhouse at %v: %w", cfg.Addr, err)
	}
	p := &Projector{cfg: cfg, conn: conn, logger: logger.With(zap.String("projector", cfg.Name)), m: newMetrics(cfg.Registerer), now: time.Now}
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout+cfg.InsertTimeout)
	defer cancel()
	if err := conn.Ping(ctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("connect to clickhouse at %v: %w", cfg.Addr, err)
	}
	return p, nil
}

// Close closes the ClickHouse connections. Close the runner first.
func (p *Projector) Close() error {
	if err := p.conn.Close(); err != nil {
		return fmt.Errorf("close clickhouse connections: %w", err)
	}
	return nil
}

// Ping reports whether ClickHouse answers, for readiness checks.
func (p *Projector) Ping(ctx context.Context) error {
	if err := p.conn.Ping(ctx); err != nil {
		return fmt.Errorf("ping clickhouse: %w", err)
	}
	return nil
}

// Conn is the ClickHouse connection pool, for queries over the tables.
func (p *Projector) Conn() driver.Conn { return p.conn }

// Database is the database holding the tables.
func (p *Projector) Database() string { return p.cfg.Database }

// Name implements projectors.Projector.
func (p *Projector) Name() string { return p.cfg.Name }

// Filter implements projectors.Projector: analytics counts every stream.
func (p *Projector) Filter() projectors.Filter { return projectors.Filter{} }

// RunnerConfig returns rc set up to drive this projector: the projector set,
// polls of up to BatchRows records, and fetches that wait up to BatchDelay
// for BatchMinBytes. The runner applies each partition's share of a poll as
// one batch, and each batch is one insert per table, so this is how the
// batch bounds reach ClickHouse: the runner commits its checkpoint per batch,
// and an insert cannot outlive the batch it belongs to without breaking the
// order described in the package comment. Fields of rc already set are
// kept; rc.KafkaOptions come after these options and so override them.
func (p *Projector) RunnerConfig(rc projectors.Config) projectors.Config {
	rc.Projector = p
	if rc.MaxPollRecords == 0 {
		rc.MaxPollRecords = p.cfg.BatchRows
	}
	opts := []kgo.Opt{
		kgo.FetchMinBytes(p.cfg.BatchMinBytes),
		kgo.FetchMaxWait(p.cfg.BatchDelay),
		// A partition's share of a fetch must be able to exceed the
		// minimum, or a busy single partition would wait out the delay on
		// every fetch.
		kgo.FetchMaxPartitionBytes(max(4*p.cfg.BatchMinBytes, 1<<20)),
	}
	rc.KafkaOptions = append(opts, rc.KafkaOptions...)
	return rc
}

// Apply implements projectors.Projector: it inserts the changes' operations
// and one documents row per changed document, each as one insert, and
// returns only once ClickHouse acknowledged both (see the package comment
// for why before the Postgres commit is right).
func (p *Projector) Apply(ctx context.Context, tx projectors.Tx, changes []projectors.Change) error {
	if len(changes) == 0 {
		return nil
	}
	docs, err := p.documentRows(ctx, tx, changes)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.InsertTimeout)
	defer cancel()
	now := p.now().UnixMilli()
	n := 0
	for i := range changes {
		n += len(changes[i].Operations)
	}
	err = p.insert(ctx, TableOperations, operationColumns, n, func(b driver.Batch) error {
		for i := range changes {
			for j := range changes[i].Operations {
				if err := appendOperation(b, &changes[i].Operations[j], now); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return p.insert(ctx, TableDocuments, documentColumns, len(docs), func(b driver.Batch) error {
		for i := range docs {
			d := &docs[i]
			if err := b.Append(d.id, d.branch, d.documentType, d.name, d.slug, d.version, d.createdAt, d.lastModified,
				d.deleted, d.deletedAt, d.revisions[0], d.revisions[1], d.revisions[2], d.operationCount, d.lastOrdinal, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// insert sends one batch to table; fill appends the rows.
func (p *Projector) insert(ctx context.Context, table string, cols []column, rows int, fill func(driver.Batch) error) error {
	if rows == 0 {
		return nil
	}
	start := time.Now()
	err := p.send(ctx, table, cols, fill)
	if err != nil {
		p.m.errors.WithLabelValues(p.cfg.Name, table).Inc()
		return &InsertError{Table: table, Rows: rows, Err: err}
	}
	took := time.Since(start)
	p.m.rows.WithLabelValues(p.cfg.Name, table).Observe(float64(rows))
	p.m.seconds.WithLabelValues(p.cfg.Name, table).Observe(took.Seconds())
	p.logger.Debug("inserted", zap.String("table", table), zap.Int("rows", rows), zap.Duration("took", took))
	return nil
}

func (p *Projector) send(ctx context.Context, table string, cols []column, fill func(driver.Batch) error) error {
	b, err := p.conn.PrepareBatch(ctx, "INSERT INTO "+p.table(table)+" ("+columnList(cols)+")")
	if err != nil {
		return err
	}
	if err := fill(b); err != nil {
		_ = b.Abort()
		return err
	}
	return b.Send()
}

func appendOperation(b driver.Batch, op *oplog.Operation, now int64) error {
	action, err := json.Marshal(&op.Action)
	if err != nil {
		return fmt.Errorf("encode the action of %s at index %d: %w", op.Stream(), op.Index, err)
	}
	var written int64
	if !op.WrittenAt.IsZero() {
		written = op.WrittenAt.UnixMilli()
	}
	return b.Append(op.DocumentID, op.Scope, op.Branch, op.Index, op.OpID, op.JobID, op.DocumentType, op.Skip, op.Hash,
		int32(op.Version), op.TimestampUtcMs, op.Action.ID, op.Action.Type, string(action), uint64(max(op.Ordinal, 0)), written, now)
}

// documentRow is one row of the documents table.
type documentRow struct {
	id, branch, documentType, name, slug string
	version                              int32
	createdAt, lastModified, deletedAt   int64
	deleted                              uint8
	// revisions of the document, global and local scopes.
	revisions      [3]int64
	operationCount uint64
	lastOrdinal    uint64
}

// keptScopes are the scopes with a revision column: the log's three named
// scopes (log.ScopeDocument, ScopeGlobal, ScopeLocal). Streams of another
// scope still count in operation_count when they are in the batch.
var keptScopes = [3]string{oplog.ScopeDocument, oplog.ScopeGlobal, oplog.ScopeLocal}

// documentRows builds the documents row of every document the changes
// touch, from the changed streams' new heads and the stored heads of the
// document's other scopes (read through tx, so they are the heads this
// batch starts from). operation_count, the row's version, is the sum of the
// revisions, which every change raises; a re-delivered batch rebuilds the
// same row with the same version.
//
// The consumer of a partition is the only writer of its documents' streams
// apart from the reconciler, which may advance another scope of the same
// document at the same moment; each then reads the other's stream at its
// old head, and the row written last may lag by that stream until the
// document's next change. The operations table is never affected.
func (p *Projector) documentRows(ctx context.Context, tx projectors.Tx, changes []projectors.Change) ([]documentRow, error) {
	type docKey struct{ id, branch string }
	heads := map[docKey]map[string]projectors.Head{}
	states := map[docKey]*model.StreamState{}
	lastOrdinal := map[docKey]int64{}
	var order []docKey
	for i := range changes {
		c := &changes[i]
		k := docKey{c.Stream.DocumentID, c.Stream.Branch}
		if heads[k] == nil {
			heads[k] = map[string]projectors.Head{}
			order = append(order, k)
		}
		heads[k][c.Stream.Scope] = c.Head
		if c.Stream.Scope == oplog.ScopeDocument {
			states[k] = c.State
		}
		for _, op := range c.Operations {
			lastOrdinal[k] = max(lastOrdinal[k], op.Ordinal)
		}
	}
	var missing []oplog.StreamKey
	for _, k := range order {
		for _, scope := range keptScopes {
			if _, ok := heads[k][scope]; !ok {
				missing = append(missing, oplog.StreamKey{DocumentID: k.id, Scope: scope, Branch: k.branch})
			}
		}
	}
	if len(missing) > 0 {
		stored, err := tx.Heads(ctx, p.cfg.Name, missing)
		if err != nil {
			return nil, fmt.Errorf("analytics: read the heads of %d unchanged streams: %w", len(missing), err)
		}
		for s, h := range stored {
			heads[docKey{s.DocumentID, s.Branch}][s.Scope] = h
		}
	}
	rows := make([]documentRow, 0, len(order))
	for _, k := range order {
		hs := heads[k]
		row := documentRow{id: k.id, branch: k.branch, lastOrdinal: uint64(max(lastOrdinal[k], 0))}
		scopes := make([]string, 0, len(hs))
		for scope := range hs {
			scopes = append(scopes, scope)
		}
		slices.Sort(scopes)
		for _, scope := range scopes {
			h := hs[scope]
			row.operationCount += uint64(h.LastIndex + 1)
			row.lastModified = max(row.lastModified, h.LastTimestampUtcMs)
			if row.documentType == "" {
				row.documentType = h.DocumentType
			}
			if i := slices.Index(keptScopes[:], scope); i >= 0 {
				row.revisions[i] = h.LastIndex + 1
			}
		}
		doc := states[k]
		if doc == nil {
			if h, ok := hs[oplog.ScopeDocument]; ok {
				st, err := h.StreamState()
				if err != nil {
					return nil, fmt.Errorf("analytics: %w", err)
				}
				doc = st
			}
		}
		if info, ok := model.DocumentInfoOf(doc); ok {
			row.documentType = info.DocumentType
			row.name, row.slug, row.version = info.Name, info.Slug, int32(info.Version)
			row.createdAt = info.CreatedAtUtcMs
			if info.IsDeleted {
				row.deleted, row.deletedAt = 1, info.DeletedAtUtcMs
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}
