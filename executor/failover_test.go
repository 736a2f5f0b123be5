package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/kafka"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model/builtin"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/record"
)

// memberProcessEnv carries a memberSpec to a re-executed test binary, which
// then runs one executor member until it is killed.
const memberProcessEnv = "DOCLOG_TEST_EXECUTOR_MEMBER"

type memberSpec struct {
	DatabaseURL string
	Kafka       kafka.Config
	Topics      kafka.Topics
	Group       string
}

func runMemberProcess(raw string) int {
	var spec memberSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "member process: decode spec:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pool, err := pgxpool.New(ctx, spec.DatabaseURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "member process: open pool:", err)
		return 2
	}
	defer pool.Close()
	reg, err := builtin.NewRegistry()
	if err != nil {
		fmt.Fprintln(os.Stderr, "member process: registry:", err)
		return 2
	}
	logger, _ := zap.NewDevelopment()
	e, err := executor.New(executor.Config{
		Store: postgres.New(pool), Registry: reg, Kafka: spec.Kafka, Topics: spec.Topics, Group: spec.Group,
		FetchMaxWait: 200 * time.Millisecond, Logger: logger,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "member process: new executor:", err)
		return 2
	}
	if err := e.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "member process: start:", err)
		return 1
	}
	select {
	case <-ctx.Done():
	case <-e.Done():
	}
	_ = e.Stop(context.Background())
	if err := e.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "member process: run:", err)
		return 1
	}
	return 0
}

// startMemberProcess runs one executor member as a process of its own.
func (b *bundle) startMemberProcess(spec memberSpec) *exec.Cmd {
	b.t.Helper()
	raw, err := json.Marshal(spec)
	require.NoError(b.t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), memberProcessEnv+"="+string(raw))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(b.t, cmd.Start())
	b.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// A member killed with SIGKILL and restarted under its member name takes
// its partitions back at once: the job submitted while it was dead
// completes long before the session of the dead member (a minute here)
// would have timed out, which is how long a dynamic member's partitions
// stayed stranded.
func TestKilledStaticMemberTakesItsPartitionsBackAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	spec := memberSpec{DatabaseURL: b.url, Kafka: b.kenv.Config, Topics: b.kenv.Names, Group: b.kenv.Group("executor")}
	spec.Kafka.Membership = kafka.Membership{MemberName: "executor-0", SessionTimeout: time.Minute, HeartbeatInterval: time.Second}

	first := b.startMemberProcess(spec)
	before := createJob("doc-before", jsondoc.DocumentType)
	b.submit(before)
	b.waitResults([]string{before.JobID}, 60*time.Second)

	require.NoError(t, first.Process.Kill())
	_, _ = first.Process.Wait()
	var during []*record.Job
	for i := range 8 {
		during = append(during, createJob(fmt.Sprintf("doc-during-%d", i), jsondoc.DocumentType))
	}
	b.submit(during...)
	start := time.Now()
	b.startMemberProcess(spec)
	// Half the session timeout: a member waiting out the dead one's
	// session could not be done by then.
	results := b.waitResults(ids(during), 30*time.Second)
	for _, j := range during {
		require.Equal(t, oplog.JobWriteReady, results[j.JobID].Status)
	}
	t.Logf("jobs submitted while the member was dead completed %s after its restart", time.Since(start).Round(time.Millisecond))
}
