package record_test

import (
	"encoding/json"
	"time"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
)

const (
	jobID  = "01938f1e-7c2a-7b3e-9d4f-5a6b7c8d9e0f"
	jobID2 = "01938f1e-7c2a-7b3e-9d4f-5a6b7c8d9e10"
	docID  = "doc-7f3a"
)

func ptr[T any](v T) *T { return &v }

func sampleJob() *record.Job {
	return &record.Job{
		JobID:        jobID,
		Kind:         record.KindMutate,
		DocumentID:   docID,
		DocumentType: "doclog/ledger",
		Branch:       "main",
		Actions: []oplog.Action{
			{ID: "a-1", Type: "ADD_ENTRY", Scope: "global", TimestampUtcMs: 1764460800000, Input: json.RawMessage(`{"amount":12,"memo":"tea \u003c\"milk\"\u003e"}`),
				Signature: &oplog.Signature{KeyID: "till-7", Algorithm: "ed25519", Value: "c2lnbmVkIGJ5IHRpbGwtNw=="}},
			{ID: "a-2", Type: "SET_NAME", Scope: "document", TimestampUtcMs: 1764460800001, Input: json.RawMessage(`"Q4 ledger"`), Context: json.RawMessage(`{"user":"ana"}`)},
		},
		QueueHint:        []string{jobID2},
		MaxRetries:       ptr(3),
		Meta:             json.RawMessage(`{"traceId":"abc"}`),
		SubmittedAtUtcMs: 1764460800002,
	}
}

func sampleOperations() []oplog.Operation {
	written := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)
	j := sampleJob()
	return []oplog.Operation{
		{OpID: "5b1c3d1e-0000-5000-8000-000000000001", JobID: jobID, DocumentID: docID, DocumentType: "doclog/ledger", Scope: "global", Branch: "main",
			Index: 4, Hash: "h4", TimestampUtcMs: 1764460800000, Version: 1, Action: j.Actions[0], Ordinal: 101, TxID: 9001, WrittenAt: written},
		{OpID: "5b1c3d1e-0000-5000-8000-000000000002", JobID: jobID, DocumentID: docID, DocumentType: "doclog/ledger", Scope: "document", Branch: "main",
			Index: 7, Skip: 0, Hash: "h7", TimestampUtcMs: 1764460800001, Version: 1, Action: j.Actions[1], Ordinal: 102, TxID: 9001, WrittenAt: written},
	}
}

func sampleWriteReady() *record.WriteReady {
	return &record.WriteReady{
		JobID: jobID, DocumentID: docID, DocumentType: "doclog/ledger", Branch: "main",
		Streams: []record.StreamWrite{
			{StreamRange: oplog.StreamRange{Stream: oplog.StreamKey{DocumentID: docID, Scope: "global", Branch: "main"}, FromIndex: 4, ToIndex: 4}, Hashes: []string{"h4"}},
			{StreamRange: oplog.StreamRange{Stream: oplog.StreamKey{DocumentID: docID, Scope: "document", Branch: "main"}, FromIndex: 7, ToIndex: 7}, Hashes: []string{"h7"}},
		},
		ConsistencyToken: oplog.ConsistencyToken{Coordinates: []oplog.Coordinate{
			{DocumentID: docID, Scope: "global", Branch: "main", Index: 4},
			{DocumentID: docID, Scope: "document", Branch: "main", Index: 7},
		}},
		Operations:       sampleOperations(),
		SubmittedAtUtcMs: 1764460800002,
		WrittenAtUtcMs:   1764460800050,
	}
}
