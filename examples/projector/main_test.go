package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"example.com/doclog-projector/balances"

	"github.com/doclog/doclog/client"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/builtin"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/model/ledger"
)

// The workload: ledgers, each created with its accounts, then jobs spread
// over them by submitters, each owning some ledgers so that a ledger's
// jobs are submitted in order.
const (
	ledgers       = 20
	jobsPerLedger = 150
	submitters    = 4
	accounts      = 6
	kills         = 3
	partitions    = "4"
	appName       = "balances-worker-test"
)

// TestWorkerKilledMidBatch runs the example's worker binary as a process
// of its own beside `doclog serve --roles=ingest,executor` (both built
// here), against the real Postgres and Kafka the repository's test scripts
// start (TEST_DATABASE_URL, TEST_KAFKA_SEEDS; run by `make test`), in a
// schema and under a topic prefix of its own. While thousands of ledger
// jobs go through ingest and the executor, it kills the worker with
// SIGKILL while one of its batch transactions is open, proven through
// pg_stat_activity, several times, restarting it each time. Once the
// worker caught up, ledger_balances must equal, row by row, the balances a
// replay of every ledger's global stream from the log gives: nothing lost,
// nothing applied twice. The filter holds (a doclog/json document and the
// ledgers' document scope leave no row and no stream head), a rebuild
// through the worker binary gives the same table, and the worker's
// `projector lag` reports 0.
func TestWorkerKilledMidBatch(t *testing.T) {
	dbURL, seeds := os.Getenv("TEST_DATABASE_URL"), os.Getenv("TEST_KAFKA_SEEDS")
	if dbURL == "" || seeds == "" {
		t.Fatal("TEST_DATABASE_URL and TEST_KAFKA_SEEDS are not set: run `make test`, or start the services with scripts/pg.sh and scripts/kafka.sh and export what they print")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := newStack(ctx, t, dbURL, seeds)

	if out, err := s.run(ctx, s.workerBin, "migrate", "--database-url", s.url); err != nil || !strings.Contains(out, "ledger-balances") {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	s.startDoclog(ctx)
	s.startWorker()
	s.awaitPartitions(ctx)

	wl := newWorkload(s)
	wl.createLedgers(ctx)
	// A document the projector does not follow, with a global and a local
	// stream: it must leave no row and no head.
	jsonDoc := wl.submit(ctx, "/v1/documents", map[string]any{"documentId": s.name + "-json", "documentType": jsondoc.DocumentType,
		"name": "not a ledger", "actions": []map[string]any{
			{"type": jsondoc.ActionMergePatch, "scope": oplog.ScopeGlobal, "input": map[string]any{"balance": 1}},
			{"type": jsondoc.ActionMergePatch, "scope": oplog.ScopeLocal, "input": map[string]any{"draft": true}},
		}})

	var wg sync.WaitGroup
	for i := range submitters {
		wg.Go(func() { wl.run(ctx, i) })
	}
	killed := 0
	for attempt := 0; killed < kills; attempt++ {
		if attempt >= 3*kills {
			t.Fatalf("only %d of %d kills found a batch transaction open", killed, kills)
		}
		if s.killMidBatch(ctx, wl, holds[attempt%len(holds)]) {
			killed++
		}
		s.startWorker()
		s.awaitPartitions(ctx)
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("the workload did not finish in time")
	}
	wl.settle(ctx)
	wl.settleJob(ctx, jsonDoc)
	t.Logf("%d jobs submitted (%d refused by the ledger's rules, as a real workload's are), %d kills mid-batch", wl.jobs, wl.failed, killed)

	want, heads := s.replay(ctx)
	if len(want) < ledgers*accounts {
		t.Fatalf("the replay holds %d accounts, fewer than the %d opened at creation", len(want), ledgers*accounts)
	}
	s.awaitTable(ctx, want, "the worker did not catch up with the log")
	s.requireHeads(ctx, heads)
	var quarantined int
	s.queryRow(ctx, `SELECT count(*) FROM quarantined_streams WHERE projector = $1`, []any{balances.Name}, &quarantined)
	if quarantined != 0 {
		t.Fatalf("%d streams quarantined: a double apply fails its hash check", quarantined)
	}
	s.requireOps(ctx)

	// The lag of its group, through the worker binary, comes to 0.
	deadline := time.Now().Add(60 * time.Second)
	for {
		lag, err := s.lag(ctx)
		if err == nil && lag == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("projector lag never reported 0: lag %d, %v", lag, err)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// The operator's other views through the worker binary: its projector
	// with a checkpoint per partition, and no quarantine.
	out, err := s.run(ctx, s.workerBin, "projector", "list", "-o", "json", "--database-url", s.url, "--topics-prefix", s.prefix)
	var listed []struct {
		Name        string
		Checkpoints []struct{ NextOffset int64 }
		Quarantines []any
	}
	if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 || listed[0].Name != balances.Name ||
		fmt.Sprint(len(listed[0].Checkpoints)) != partitions || len(listed[0].Quarantines) != 0 {
		s.t.Fatalf("projector list: %v\n%s", err, out)
	}
	out, err = s.run(ctx, s.workerBin, "quarantine", "list", "-o", "json", "--database-url", s.url)
	var qs []any
	if err != nil || json.Unmarshal([]byte(out), &qs) != nil || len(qs) != 0 {
		s.t.Fatalf("quarantine list: %v\n%s", err, out)
	}

	// A rebuild through the worker binary, with the worker serving, gives
	// the same table and heads.
	out, err = s.run(ctx, s.workerBin, "projector", "rebuild", balances.Name, "-o", "json", "--database-url", s.url,
		"--kafka-seeds", s.seeds, "--topics-prefix", s.prefix, "--timeout", "3m")
	if err != nil {
		t.Fatalf("rebuild: %v\n%s", err, out)
	}
	var rep struct{ Generation string }
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Generation == "" {
		t.Fatalf("rebuild report %q: %v", out, err)
	}
	if got := s.table(ctx); !equal(got, want) {
		t.Fatalf("the rebuilt table differs from the replay:\n%s", diff(got, want))
	}
	s.requireHeads(ctx, heads)
	var leftovers int
	s.queryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'ledger_balances_%'`, nil, &leftovers)
	if leftovers != 0 {
		t.Fatalf("%d tables of other generations are left after the rebuild", leftovers)
	}
	s.stopWorker()
}

// stack is the test's services: its schema and topic prefix, the two
// binaries and their processes.
type stack struct {
	t                    *testing.T
	name, prefix, seeds  string
	url                  string // the test's schema; the worker's carries appName
	pool                 *pgxpool.Pool
	dir                  string
	workerBin, doclogBin string
	ingest               string // the ingest API's base URL
	workerOps            string
	worker               *exec.Cmd
	logs                 *os.File
}

func newStack(ctx context.Context, t *testing.T, dbURL, seeds string) *stack {
	suffix := make([]byte, 6)
	_, _ = crand.Read(suffix)
	s := &stack{t: t, name: "projex_" + hex.EncodeToString(suffix), seeds: seeds, dir: t.TempDir()}
	s.prefix = s.name + "."

	admin, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+s.name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+s.name+" CASCADE")
		admin.Close()
	})
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("options", "-csearch_path="+s.name)
	u.RawQuery = q.Encode()
	s.url = u.String()
	if s.pool, err = pgxpool.New(ctx, s.url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.pool.Close)
	t.Cleanup(func() { s.deleteTopics() })

	if s.logs, err = os.Create(filepath.Join(s.dir, "processes.log")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(s.logs.Name())
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			t.Logf("the processes' last output:\n%s", b)
		}
		_ = s.logs.Close()
	})
	// A test that fails between a worker's start and its stop must not
	// leave it running past the test, polling the topics the cleanup
	// deletes. Registered after the others, so it runs first.
	t.Cleanup(func() {
		if s.worker != nil && s.worker.ProcessState == nil {
			_ = s.worker.Process.Kill()
			_ = s.worker.Wait()
		}
	})

	// Both binaries, built at once: the worker from this module, doclog
	// from the repository the replace directive points to.
	s.workerBin, s.doclogBin = filepath.Join(s.dir, "balances-worker"), filepath.Join(s.dir, "doclog")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, b := range []struct{ dir, out, pkg string }{{".", s.workerBin, "."}, {"../..", s.doclogBin, "./cmd/doclog"}} {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, "go", "build", "-o", b.out, b.pkg)
			cmd.Dir = b.dir
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("go build %s: %w\n%s", b.pkg, err, out)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func (s *stack) run(ctx context.Context, bin string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, io.MultiWriter(&out, s.logs)
	err := cmd.Run()
	return out.String(), err
}

// topicFlags are the topic settings both processes share.
func (s *stack) topicFlags() []string {
	return []string{"--kafka-seeds", s.seeds, "--topics-prefix", s.prefix, "--topics-jobs-partitions", partitions,
		"--kafka-session-timeout", "6s", "--kafka-heartbeat-interval", "500ms", "--log-level", "warn"}
}

func (s *stack) startDoclog(ctx context.Context) {
	ingestAddr, ops := freeAddr(s.t), freeAddr(s.t)
	cmd := exec.Command(s.doclogBin, append([]string{"serve", "--roles=ingest,executor", "--database-url", s.url,
		"--ingest-addr", ingestAddr, "--ops-addr", ops}, s.topicFlags()...)...)
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	s.ingest = "http://" + ingestAddr
	s.awaitReady(ctx, "http://"+ops+"/readyz", "doclog serve")
}

// startWorker starts the worker, under static membership so that a
// restart takes its partitions back at once, its connections named
// appName.
func (s *stack) startWorker() {
	s.workerOps = freeAddr(s.t)
	u, _ := url.Parse(s.url)
	q := u.Query()
	q.Set("application_name", appName)
	u.RawQuery = q.Encode()
	s.worker = exec.Command(s.workerBin, append([]string{"serve", "--database-url", u.String(), "--ops-addr", s.workerOps,
		"--member-name", "balances-0"}, s.topicFlags()...)...)
	s.worker.Stdout, s.worker.Stderr = s.logs, s.logs
	if err := s.worker.Start(); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stack) stopWorker() {
	_ = s.worker.Process.Signal(syscall.SIGTERM)
	if err := s.worker.Wait(); err != nil {
		s.t.Errorf("the worker did not stop cleanly: %v", err)
	}
}

// awaitPartitions waits until the running worker holds every partition:
// each checkpoint's epoch moved past the one before the start.
func (s *stack) awaitPartitions(ctx context.Context) {
	s.awaitReady(ctx, "http://"+s.workerOps+"/readyz", "the worker")
	s.eventually(ctx, 90*time.Second, "the worker did not take its partitions", func() bool {
		var n int
		s.queryRow(ctx, `SELECT count(*) FROM projector_checkpoints WHERE projector = $1`, []any{balances.Name}, &n)
		return fmt.Sprint(n) == partitions
	})
}

// hold is where a kill catches a batch transaction: rows the test locks,
// and the worker's statement that then waits on them.
type hold struct {
	where string
	lock  string // SQL taking the rows
	waits string // a LIKE pattern of the waiting statement
}

var holds = []hold{
	// The checkpoint rows, which every batch locks first thing after BEGIN
	// (its fence): the batch is open and has sent nothing but that.
	{"at its fence", `SELECT 1 FROM projector_checkpoints WHERE projector = '` + balances.Name + `' ORDER BY partition FOR UPDATE`, `%projector_checkpoints%FOR UPDATE%`},
	// The projector's rows, which the batch writes in its last round trip,
	// with the heads, the checkpoints and COMMIT behind them: the batch
	// has verified and claimed its streams.
	{"writing its rows", `SELECT 1 FROM ledger_balances FOR UPDATE`, `%INSERT INTO "ledger_balances"%`},
}

// lockHold takes the hold's rows in a transaction it leaves open. The
// worker's batch may hold some of them already while it waits on others
// the test has taken, and Postgres then breaks the cycle by aborting one
// side: when that is the test's side it takes the rows again, since the
// worker's batch goes on and will commit or wait.
func (s *stack) lockHold(ctx context.Context, h hold) pgx.Tx {
	for attempt := 1; ; attempt++ {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			s.t.Fatal(err)
		}
		_, err = tx.Exec(ctx, h.lock)
		if err == nil {
			return tx
		}
		_ = tx.Rollback(context.WithoutCancel(ctx))
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "40P01" || attempt == 10 {
			s.t.Fatalf("taking the rows %s: %v", h.where, err)
		}
	}
}

// killMidBatch locks the hold's rows until a transaction of the worker's
// waits on them, with xact_start set: one of its batches is open and has
// not committed. It kills the worker with SIGKILL there, lets go of the
// rows, and waits for the killed transaction's backend to end, which it
// does once it has the rows and finds its client gone (a COMMIT the worker
// sent before it died may run first: a batch the worker never learned of).
// It reports false when no batch came (the workload was over); some jobs
// are submitted then, so the next attempt has a batch to catch.
func (s *stack) killMidBatch(ctx context.Context, wl *workload, h hold) bool {
	tx := s.lockHold(ctx, h)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var pid int
	var open time.Duration
	deadline := time.Now().Add(20 * time.Second)
	for pid == 0 && time.Now().Before(deadline) {
		err := s.pool.QueryRow(ctx, `SELECT pid, clock_timestamp() - xact_start FROM pg_stat_activity
WHERE application_name = $1 AND xact_start IS NOT NULL AND state = 'active' AND wait_event_type = 'Lock'
  AND query LIKE $2 LIMIT 1`, appName, h.waits).Scan(&pid, &open)
		if err == pgx.ErrNoRows {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			s.t.Fatal(err)
		}
	}
	if err := s.worker.Process.Signal(syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
	_ = s.worker.Wait()
	if pid == 0 {
		wl.topUp(ctx)
		return false
	}
	if err := tx.Rollback(ctx); err != nil {
		s.t.Fatal(err)
	}
	// The backend finds its client gone once it has the rows and answers:
	// its transaction ends, rolled back.
	s.eventually(ctx, 30*time.Second, "the killed worker's transaction never ended", func() bool {
		var n int
		s.queryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND xact_start IS NOT NULL`, []any{pid}, &n)
		return n == 0
	})
	s.t.Logf("killed the worker with a batch transaction open %s for %s (backend %d)", h.where, open.Round(time.Millisecond), pid)
	return true
}

func (s *stack) awaitReady(ctx context.Context, u, what string) {
	s.eventually(ctx, 90*time.Second, what+" never became ready", func() bool {
		resp, err := http.Get(u)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func (s *stack) eventually(ctx context.Context, timeout time.Duration, msg string, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.t.Fatal(msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *stack) queryRow(ctx context.Context, sql string, args []any, dest ...any) {
	s.t.Helper()
	if err := s.pool.QueryRow(ctx, sql, args...).Scan(dest...); err != nil {
		s.t.Fatalf("%s: %v", sql, err)
	}
}

// account is one row of ledger_balances, or of a replay.
type account struct {
	Name      string
	Balance   int64
	Closed    bool
	LastIndex int64
}

type accountKey struct{ doc, branch, id string }

func (s *stack) table(ctx context.Context) map[accountKey]account {
	rows, err := s.pool.Query(ctx, `SELECT document_id, branch, account_id, name, balance, closed, last_index FROM ledger_balances`)
	if err != nil {
		s.t.Fatal(err)
	}
	got := map[accountKey]account{}
	for rows.Next() {
		var k accountKey
		var a account
		if err := rows.Scan(&k.doc, &k.branch, &k.id, &a.Name, &a.Balance, &a.Closed, &a.LastIndex); err != nil {
			s.t.Fatal(err)
		}
		got[k] = a
	}
	if err := rows.Err(); err != nil {
		s.t.Fatal(err)
	}
	return got
}

// replay rebuilds every ledger's global stream from the log with the
// model registry and returns the accounts it holds, and the last index of
// every stream the projector follows: the ledgers' global streams.
func (s *stack) replay(ctx context.Context) (map[accountKey]account, map[oplog.StreamKey]int64) {
	log := postgres.New(s.pool)
	reg, err := builtin.NewRegistry()
	if err != nil {
		s.t.Fatal(err)
	}
	want := map[accountKey]account{}
	heads := map[oplog.StreamKey]int64{}
	for cursor := ""; ; {
		page, err := log.ListDocuments(ctx, cursor, 100)
		if err != nil {
			s.t.Fatal(err)
		}
		revs, err := log.Heads(ctx, page.DocumentIDs)
		if err != nil {
			s.t.Fatal(err)
		}
		for k, rev := range revs {
			if k.Scope != oplog.ScopeGlobal || rev == 0 {
				continue
			}
			var ops []oplog.Operation
			for len(ops) < int(rev) {
				more, err := log.ReadStream(ctx, k, int64(len(ops)), 1000)
				if err != nil || len(more) == 0 {
					s.t.Fatalf("read %s: %v", k, err)
				}
				ops = append(ops, more...)
			}
			if ops[0].DocumentType != ledger.DocumentType {
				continue
			}
			st := model.NewStreamState(k, ledger.DocumentType)
			if err := reg.Replay(st, ops); err != nil {
				s.t.Fatalf("replay %s: %v", k, err)
			}
			heads[k] = rev - 1
			for id, v := range st.State.(map[string]any)["accounts"].(map[string]any) {
				a := v.(map[string]any)
				want[accountKey{k.DocumentID, k.Branch, id}] = account{
					Name: a["name"].(string), Balance: int64(a["balance"].(float64)), Closed: a["closed"].(bool), LastIndex: rev - 1,
				}
			}
		}
		if page.Next == "" || len(page.DocumentIDs) == 0 {
			return want, heads
		}
		cursor = page.Next
	}
}

func (s *stack) awaitTable(ctx context.Context, want map[accountKey]account, msg string) {
	s.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got := s.table(ctx)
		if equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s:\n%s", msg, diff(got, want))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// requireHeads checks the projector's stream heads: the ledgers' global
// streams at their last index, nothing else (no document scope, no
// doclog/json document).
func (s *stack) requireHeads(ctx context.Context, want map[oplog.StreamKey]int64) {
	s.t.Helper()
	rows, err := s.pool.Query(ctx, `SELECT document_id, scope, branch, last_index FROM projector_streams WHERE projector = $1`, balances.Name)
	if err != nil {
		s.t.Fatal(err)
	}
	got := map[oplog.StreamKey]int64{}
	for rows.Next() {
		var k oplog.StreamKey
		var last int64
		if err := rows.Scan(&k.DocumentID, &k.Scope, &k.Branch, &last); err != nil {
			s.t.Fatal(err)
		}
		got[k] = last
	}
	if err := rows.Err(); err != nil {
		s.t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		s.t.Fatalf("the projector's heads are\n%v\nnot the ledgers' global streams\n%v", got, want)
	}
	var others int
	s.queryRow(ctx, `SELECT count(*) FROM projector_streams WHERE projector LIKE $1`, []any{balances.Name + "_%"}, &others)
	if others != 0 {
		s.t.Fatalf("%d heads are kept under another generation's name", others)
	}
}

// requireOps checks the worker's ops port: ready, and its metrics carry
// the projector's series and its group's lag.
func (s *stack) requireOps(ctx context.Context) {
	s.awaitReady(ctx, "http://"+s.workerOps+"/readyz", "the worker")
	resp, err := http.Get("http://" + s.workerOps + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, series := range []string{`doclog_projector_batches_total{projector="ledger_balances"}`, `group="` + s.prefix + `doclog-ledger_balances"`} {
		if !bytes.Contains(body, []byte(series)) {
			s.t.Fatalf("the worker's /metrics lack %s", series)
		}
	}
}

// lag is the sum of the worker group's lag as `projector lag` reports it.
func (s *stack) lag(ctx context.Context) (int64, error) {
	out, err := s.run(ctx, s.workerBin, "projector", "lag", "-o", "json", "--kafka-seeds", s.seeds, "--topics-prefix", s.prefix)
	if err != nil {
		return -1, fmt.Errorf("%w: %s", err, out)
	}
	var lags []struct {
		Group string
		Lag   int64
	}
	if err := json.Unmarshal([]byte(out), &lags); err != nil {
		return -1, fmt.Errorf("%w: %s", err, out)
	}
	if len(lags) == 0 {
		return -1, fmt.Errorf("no partition in %s", out)
	}
	var sum int64
	for _, l := range lags {
		if l.Group != s.prefix+"doclog-"+balances.Name {
			return -1, fmt.Errorf("group %s is not the worker's", l.Group)
		}
		sum += l.Lag
	}
	return sum, nil
}

func (s *stack) deleteTopics() {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(s.seeds, ",")...))
	if err != nil {
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return
	}
	var ours []string
	for _, name := range topics.Names() {
		if strings.HasPrefix(name, s.prefix) {
			ours = append(ours, name)
		}
	}
	_, _ = adm.DeleteTopics(ctx, ours...)
}

func equal(got, want map[accountKey]account) bool { return diff(got, want) == "" }

// diff lists the rows that differ, at most ten.
func diff(got, want map[accountKey]account) string {
	var out []string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			out = append(out, fmt.Sprintf("missing %v: want %+v", k, w))
		} else if g != w {
			out = append(out, fmt.Sprintf("%v: got %+v, want %+v", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("extra %v: %+v", k, g))
		}
	}
	if len(out) > 10 {
		out = append(out[:10], fmt.Sprintf("... %d more", len(out)-10))
	}
	return strings.Join(out, "\n")
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// workload submits ledger jobs through the ingest API.
type workload struct {
	s      *stack
	client *http.Client
	mu     sync.Mutex
	last   map[string]string // a ledger's last job
	jobs   int
	failed int
}

func newWorkload(s *stack) *workload {
	return &workload{s: s, client: &http.Client{Timeout: 30 * time.Second}, last: map[string]string{}}
}

func (w *workload) ledgerID(i int) string { return fmt.Sprintf("%s-ledger-%02d", w.s.name, i) }

func (w *workload) createLedgers(ctx context.Context) {
	for i := range ledgers {
		actions := make([]map[string]any, accounts)
		for a := range actions {
			actions[a] = map[string]any{"type": ledger.ActionOpenAccount, "scope": oplog.ScopeGlobal,
				"input": ledger.OpenAccountInput{AccountID: fmt.Sprintf("a%d", a), Name: fmt.Sprintf("account %d", a), InitialBalance: 1000}}
		}
		id := w.ledgerID(i)
		w.record(id, w.submit(ctx, "/v1/documents", map[string]any{"documentId": id, "documentType": ledger.DocumentType,
			"name": fmt.Sprintf("ledger %d", i), "actions": actions}))
	}
}

// run submits the jobs of the ledgers submitter n owns, paced so that the
// workload lasts while the worker is killed and restarted: transfers
// (some refused as overdrafts), deposits, accounts opened empty and closed
// again.
func (w *workload) run(ctx context.Context, n int) {
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	type ledgerState struct {
		id     string
		opened []string // empty accounts that may be closed
		next   int
	}
	var mine []*ledgerState
	for i := n; i < ledgers; i += submitters {
		mine = append(mine, &ledgerState{id: w.ledgerID(i)})
	}
	for j := 0; j < jobsPerLedger*len(mine) && ctx.Err() == nil; j++ {
		l := mine[j%len(mine)]
		var act map[string]any
		switch r := rng.IntN(100); {
		case r < 8:
			id := fmt.Sprintf("t%d", l.next)
			l.next++
			l.opened = append(l.opened, id)
			act = map[string]any{"type": ledger.ActionOpenAccount, "input": ledger.OpenAccountInput{AccountID: id, Name: "temporary " + id}}
		case r < 15 && len(l.opened) > 0:
			id := l.opened[0]
			l.opened = l.opened[1:]
			act = map[string]any{"type": ledger.ActionCloseAccount, "input": ledger.CloseAccountInput{AccountID: id}}
		case r < 25:
			act = map[string]any{"type": ledger.ActionDeposit, "input": ledger.AmountInput{AccountID: fmt.Sprintf("a%d", rng.IntN(accounts)), Amount: 1 + rng.Int64N(100)}}
		default:
			from := rng.IntN(accounts)
			to := (from + 1 + rng.IntN(accounts-1)) % accounts
			act = map[string]any{"type": ledger.ActionTransfer, "input": ledger.TransferInput{
				From: fmt.Sprintf("a%d", from), To: fmt.Sprintf("a%d", to), Amount: 1 + rng.Int64N(300)}}
		}
		act["scope"] = oplog.ScopeGlobal
		w.record(l.id, w.submit(ctx, "/v1/jobs", map[string]any{"documentId": l.id, "documentType": ledger.DocumentType,
			"actions": []map[string]any{act}}))
		time.Sleep(25 * time.Millisecond)
	}
}

// topUp submits a deposit to every ledger, for a kill that found no batch
// to catch; the ledgers' submitters are done by then or about to be, and
// a deposit is never refused, so the order does not matter.
func (w *workload) topUp(ctx context.Context) {
	for i := range ledgers {
		id := w.ledgerID(i)
		w.record(id, w.submit(ctx, "/v1/jobs", map[string]any{"documentId": id, "documentType": ledger.DocumentType,
			"actions": []map[string]any{{"type": ledger.ActionDeposit, "scope": oplog.ScopeGlobal, "input": ledger.AmountInput{AccountID: "a0", Amount: 1}}}}))
	}
}

func (w *workload) record(ledgerID, jobID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last[ledgerID] = jobID
	w.jobs++
}

// submit posts a job and returns its id, retrying while ingest is
// unavailable or refuses for backpressure.
func (w *workload) submit(ctx context.Context, path string, body any) string {
	b, err := json.Marshal(body)
	if err != nil {
		w.s.t.Error(err)
		return ""
	}
	for {
		resp, err := w.client.Post(w.s.ingest+path, "application/json", bytes.NewReader(b))
		if err != nil {
			w.s.t.Errorf("submit: %v", err)
			return ""
		}
		var accepted struct{ JobID string }
		out, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusAccepted && json.Unmarshal(out, &accepted) == nil:
			return accepted.JobID
		case (resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests) && ctx.Err() == nil:
			// Ingest's admission refuses while the executors are behind
			// (a killed worker's restart can hold them), and says when to
			// come back, as a producer would honour it.
			time.Sleep(max(client.RetryAfter(resp.Header, time.Now()), 100*time.Millisecond))
		default:
			w.s.t.Errorf("submit %s: %d %s", path, resp.StatusCode, out)
			return ""
		}
	}
}

// settle waits for every ledger's last job: a ledger's jobs are executed
// in order, so the others are done too. It counts the jobs refused.
func (w *workload) settle(ctx context.Context) {
	for _, id := range w.last {
		w.settleJob(ctx, id)
	}
	var failed int
	w.s.queryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'FAILED'`, nil, &failed)
	w.failed = failed
}

func (w *workload) settleJob(ctx context.Context, jobID string) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		resp, err := w.client.Get(w.s.ingest + "/v1/jobs/" + jobID + "?wait=20s")
		if err != nil {
			w.s.t.Fatal(err)
		}
		var st struct{ Status string }
		err = json.NewDecoder(resp.Body).Decode(&st)
		_ = resp.Body.Close()
		if err == nil && st.Status != "" && st.Status != string(oplog.JobPending) {
			return
		}
	}
	w.s.t.Fatalf("job %s never settled", jobID)
}
