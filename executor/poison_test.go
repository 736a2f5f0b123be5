package executor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/doclog/doclog/executor"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/model/ledger"
	"github.com/doclog/doclog/record"
)

const panicType = "test/panic"

// panicModel's only action panics: a reducer bug the executor must contain.
func panicModel() model.Model {
	return model.MustSpec(model.Spec{
		DocumentType: panicType,
		ModelVersion: 1,
		Initial:      map[string]func() any{oplog.ScopeGlobal: func() any { return map[string]any{} }},
		ActionList: []*model.ActionSpec{{
			Type: "PANIC", Scopes: []string{oplog.ScopeGlobal},
			Reduce: func(any, *model.Call) (any, error) { panic("reducer exploded") },
		}},
	})
}

// Poison on one partition — an undecodable record, an unknown document type,
// actions the model rejects, a reducer panic, an oversized record — each ends
// as a dead letter (and a FAILED job where it had a job id) with a precise
// reason, and the jobs after them on the same partition complete.
func TestPoisonDoesNotBlockThePartition(t *testing.T) {
	t.Parallel()
	b := setup(t, 1, panicModel())
	dlq := b.reader(b.kenv.Names.DeadLetters)
	cfg := b.config()
	cfg.JobTimeout = time.Second
	cfg.MaxRecordBytes = 100 << 10
	b.start(cfg)

	// An undecodable record, written straight to the topic.
	b.produce(&kgo.Record{Topic: b.kenv.Names.Jobs, Key: []byte("doc-garbage"), Value: []byte("{not json")})
	unknown := createJob("doc-unknown", "acme/unknown")
	ledgerCreate := createJob("doc-ledger", ledger.DocumentType)
	open := mutateJob("doc-ledger", ledger.DocumentType, action(oplog.ScopeGlobal, ledger.ActionOpenAccount, map[string]any{"accountId": "a", "initialBalance": 10}))
	overdraft := mutateJob("doc-ledger", ledger.DocumentType, action(oplog.ScopeGlobal, ledger.ActionWithdraw, map[string]any{"accountId": "a", "amount": 100}))
	deposit := mutateJob("doc-ledger", ledger.DocumentType, action(oplog.ScopeGlobal, ledger.ActionDeposit, map[string]any{"accountId": "a", "amount": 5}))
	jsonCreate := createJob("doc-json", jsondoc.DocumentType)
	unknownAction := mutateJob("doc-json", jsondoc.DocumentType, action(oplog.ScopeGlobal, "NOPE", map[string]any{}))
	recreate := createJob("doc-json", ledger.DocumentType)
	wrongType := mutateJob("doc-json", ledger.DocumentType, action(oplog.ScopeGlobal, ledger.ActionDeposit, map[string]any{"accountId": "a", "amount": 5}))
	panicCreate := createJob("doc-panic", panicType)
	panics := mutateJob("doc-panic", panicType, action(oplog.ScopeGlobal, "PANIC", map[string]any{}))
	b.submit(unknown, ledgerCreate, open, overdraft, deposit, jsonCreate, unknownAction, recreate, wrongType, panicCreate, panics)
	// An oversized record: a valid job, too large for this member.
	big := patchJob("doc-json", 1)
	big.Actions[0].Input = []byte(`{"blob":"` + strings.Repeat("x", 150<<10) + `"}`)
	bigRec, err := record.NewJobRecord(b.kenv.Names.Jobs, big)
	require.NoError(t, err)
	b.produce(bigRec)
	later := patchJob("doc-json", 2)
	b.submit(later)

	all := []*record.Job{unknown, ledgerCreate, open, overdraft, deposit, jsonCreate, unknownAction, recreate, wrongType, panicCreate, panics, later}
	results := b.waitResults(ids(all), 30*time.Second)
	for _, j := range []*record.Job{ledgerCreate, open, deposit, jsonCreate, panicCreate, later} {
		require.Equal(t, oplog.JobWriteReady, results[j.JobID].Status, "job %s: %+v", j.JobID, results[j.JobID].ErrorHistory)
	}
	failed := map[string]struct {
		job      *record.Job
		name     string
		contains string
	}{
		string(record.ErrUnknownDocumentType): {unknown, model.NameModelNotFound, "acme/unknown"},
		string(record.ErrReducer):             {overdraft, model.NameBusinessRuleViolation, ledger.RuleOverdraft},
		string(record.ErrInvalidAction):       {unknownAction, model.NameUnknownActionType, "NOPE"},
		string(record.ErrReducerPanic):        {panics, model.NameReducerError, "reducer exploded"},
	}
	for _, f := range failed {
		r := results[f.job.JobID]
		require.Equal(t, oplog.JobFailed, r.Status, "job %s", f.job.JobID)
		require.NotEmpty(t, r.ErrorHistory)
		last := r.ErrorHistory[len(r.ErrorHistory)-1]
		require.Equal(t, f.name, last.Name)
		require.Contains(t, last.Message, f.contains)
	}
	// A create of an existing document, and a job naming another type than
	// the document's, fail without touching it.
	for j, name := range map[*record.Job]string{recreate: model.NameDocumentExists, wrongType: executor.NameDocumentTypeMismatch} {
		r := results[j.JobID]
		require.Equal(t, oplog.JobFailed, r.Status)
		require.Equal(t, name, r.ErrorHistory[len(r.ErrorHistory)-1].Name)
	}
	// The state survived the refused actions: the deposit applied on top of
	// the opening balance, and the later job on doc-json did too.
	b.checkDocument("doc-json", jsondoc.DocumentType, []string{later.JobID})

	// Dead letters by job id, and by type for records that never decoded.
	letters := dlq.deadLetters(30*time.Second, 8, func(d *record.DeadLetter) string {
		if d.Job != nil {
			return d.Job.JobID
		}
		return string(d.ErrorType)
	})
	for typ, f := range failed {
		d := letters[f.job.JobID]
		require.NotNil(t, d, "a %s dead letter", typ)
		require.Equal(t, typ, string(d.ErrorType))
		require.Equal(t, f.name, d.Error.Name)
		require.Contains(t, d.Error.Message, f.contains)
		require.Equal(t, b.kenv.Names.Jobs, d.Source.Topic)
	}
	require.Equal(t, executor.NamePanic, letters[panics.JobID].Error.Cause.Name)
	require.Equal(t, record.ErrDocumentExists, letters[recreate.JobID].ErrorType)
	require.Equal(t, record.ErrInvalidAction, letters[wrongType.JobID].ErrorType)
	garbage := letters[string(record.ErrDecode)]
	require.NotNil(t, garbage)
	require.Equal(t, "doc-garbage", garbage.Source.Key)
	require.Contains(t, garbage.Undecodable.Reason, "JSON")
	require.Equal(t, []byte("{not json"), garbage.Undecodable.Value)
	tooBig := letters[string(record.ErrRecordTooLarge)]
	require.NotNil(t, tooBig)
	require.True(t, tooBig.Undecodable.Truncated)
	require.Equal(t, len(bigRec.Value), tooBig.Undecodable.Size)

	ops, err := b.store.ReadStream(context.Background(), oplog.StreamKey{DocumentID: "doc-ledger", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}, 0, 0)
	require.NoError(t, err)
	require.Len(t, ops, 2, "open and deposit; the overdraft wrote nothing")
	require.Equal(t, deposit.JobID, ops[1].JobID)
}

// A document type this member does not know waits instead of failing (a
// rolling upgrade may be bringing the model in): once a member that knows it
// takes the partition over, the job completes.
func TestUnknownModelWaitsForRollingUpgrade(t *testing.T) {
	t.Parallel()
	b := setup(t, 1, newModel())
	core, logs := observer.New(zap.InfoLevel)
	old := b.config()
	old.Registry = registry(t) // the built-in models only
	old.Logger = zap.New(core)
	oldMember := b.start(old)

	create := createJob("doc-new", newType)
	other := createJob("doc-other", jsondoc.DocumentType)
	b.submit(create, other)
	b.waitResults(ids([]*record.Job{other}), 30*time.Second)
	waitFor(t, 30*time.Second, "the job waits for its model", func() bool {
		return logs.FilterMessage("job waits for its model").Len() > 0
	})
	res, err := b.store.JobResults(context.Background(), []string{create.JobID})
	require.NoError(t, err)
	require.Empty(t, res, "the old member neither applied nor failed the job")

	oldMember.stop()
	b.start(b.config())
	results := b.waitResults([]string{create.JobID}, 30*time.Second)
	require.Equal(t, oplog.JobWriteReady, results[create.JobID].Status)
}

const newType = "test/new"

func newModel() model.Model {
	return model.MustSpec(model.Spec{
		DocumentType: newType,
		ModelVersion: 1,
		Initial:      map[string]func() any{oplog.ScopeGlobal: func() any { return map[string]any{} }},
		ActionList: []*model.ActionSpec{{
			Type: "NOOP", Scopes: []string{oplog.ScopeGlobal},
			Reduce: func(state any, _ *model.Call) (any, error) { return state, nil },
		}},
	})
}
