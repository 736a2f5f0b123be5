package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/doclog/doclog/client"
)

// Read your own writes: create a document, wait until the executor has
// committed it, and read it with the job's consistency token, so the read
// store answers only once the document view holds the write.
func ExampleClient_readYourWrites() {
	ctx := context.Background()
	c, err := client.New(client.Config{IngestURL: ingestURL, ReadstoreURL: readstoreURL, Token: writeToken})
	if err != nil {
		log.Fatal(err)
	}
	acc, err := c.CreateDocument(ctx, client.CreateDocument{DocumentType: "doclog/json", Name: "Quarterly report",
		Actions: []client.Action{{Type: "MERGE_PATCH", Scope: "global", Input: map[string]any{"status": "draft"}}}})
	if err != nil {
		log.Fatal(err)
	}
	st, err := c.WaitJob(ctx, acc.JobID)
	if err != nil {
		log.Fatal(err)
	}
	doc, err := c.GetDocument(ctx, acc.DocumentID, client.WithConsistencyToken(st.ConsistencyToken))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(doc.Name, string(doc.Scopes["global"].State))
	// Output: Quarterly report {"status":"draft"}
}

// A submit sent twice with one Idempotency-Key is one job: the second
// names the same job and document, and the executor commits it once.
func ExampleWithIdempotencyKey() {
	ctx := context.Background()
	c, err := client.New(client.Config{IngestURL: ingestURL, WriteToken: writeToken})
	if err != nil {
		log.Fatal(err)
	}
	key := "example-" + uuid.NewString() // keys are global: make them unique
	create := client.CreateDocument{DocumentType: "doclog/json", Name: "once"}
	first, err := c.CreateDocument(ctx, create, client.WithIdempotencyKey(key))
	if err != nil {
		log.Fatal(err)
	}
	again, err := c.CreateDocument(ctx, create, client.WithIdempotencyKey(key))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first.JobID == again.JobID, first.DocumentID == again.DocumentID)
	// Output: true true
}

// A job the executor refuses ends FAILED, and WaitJob returns its error
// history as a *client.JobFailedError.
func ExampleJobFailedError() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(client.Config{IngestURL: ingestURL, WriteToken: writeToken, ReadToken: readToken})
	if err != nil {
		log.Fatal(err)
	}
	acc, err := c.SubmitJob(ctx, client.Job{DocumentID: "no-such-document", DocumentType: "doclog/json",
		Actions: []client.Action{{Type: "MERGE_PATCH", Scope: "global", Input: map[string]any{"n": 1}}}})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.WaitJob(ctx, acc.JobID)
	var failed *client.JobFailedError
	if errors.As(err, &failed) {
		fmt.Println("failed:", failed.ErrorHistory[len(failed.ErrorHistory)-1].Name)
	}
	// Output: failed: DocumentNotFound
}

// An answer other than success is a *client.APIError; helpers name the
// common cases.
func ExampleIsNotFound() {
	ctx := context.Background()
	c, err := client.New(client.Config{ReadstoreURL: readstoreURL, Token: readToken})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.GetDocument(ctx, "no-such-document")
	fmt.Println(client.IsNotFound(err))
	if e := client.AsAPIError(err); e != nil {
		fmt.Println(e.StatusCode, e.Code)
	}
	// Output:
	// true
	// 404 document_not_found
}

// Follow a document's changes while submitting to it: the feed, filtered
// by the document's id, yields one change per committed job in commit
// order, and resumes by itself if the connection drops.
func ExampleClient_Changes() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(client.Config{IngestURL: ingestURL, ReadstoreURL: readstoreURL, WriteToken: writeToken, ReadToken: readToken})
	if err != nil {
		log.Fatal(err)
	}
	acc, err := c.CreateDocument(ctx, client.CreateDocument{DocumentType: "doclog/json", Name: "followed"})
	if err != nil {
		log.Fatal(err)
	}
	submitted := make(chan error, 1)
	go func() {
		// Each job waits for the one before, so they commit in this order.
		for _, a := range []client.Action{
			{Type: "MERGE_PATCH", Scope: "global", Input: map[string]any{"status": "final"}},
			{Type: "ADD_RELATIONSHIP", Scope: "document", Input: map[string]any{"targetId": "appendix-1", "type": "child"}},
		} {
			j, err := c.SubmitJob(ctx, client.Job{DocumentID: acc.DocumentID, DocumentType: "doclog/json", Actions: []client.Action{a}})
			if err == nil {
				_, err = c.WaitJob(ctx, j.JobID)
			}
			if err != nil {
				submitted <- err
				return
			}
		}
		_, err := c.DeleteDocument(ctx, client.DeleteDocument{DocumentID: acc.DocumentID, DocumentType: "doclog/json"})
		submitted <- err
	}()

	feed := c.Changes(client.ChangesQuery{DocumentIDs: []string{acc.DocumentID}, FromBeginning: true})
	n := 0
	for ch, err := range feed.All(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ch.Kind, ch.Kinds)
		if n++; n == 4 {
			break
		}
	}
	if err := <-submitted; err != nil {
		log.Fatal(err)
	}
	// Output:
	// created [created updated]
	// updated [updated]
	// relationship.added [relationship.added]
	// deleted [deleted]
}

// Many goroutines, each submitting one job at a time, share requests
// through a Batcher: the jobs submitted while its requests are out leave
// together in POST /v1/jobs:batch, and each caller gets its own job's
// acceptance.
func ExampleBatcher() {
	ctx := context.Background()
	c, err := client.New(client.Config{IngestURL: ingestURL, ReadstoreURL: readstoreURL, WriteToken: writeToken, ReadToken: readToken})
	if err != nil {
		log.Fatal(err)
	}
	doc, err := c.CreateDocument(ctx, client.CreateDocument{DocumentType: "doclog/json"})
	if err != nil {
		log.Fatal(err)
	}
	b, err := c.NewBatcher(client.BatcherConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	var wg sync.WaitGroup
	accepted := make([]*client.Accepted, 10)
	for i := range accepted {
		wg.Go(func() {
			// Ten concurrent jobs on one document: they have no order
			// between them, and merge patches of distinct keys commute.
			acc, err := b.Submit(ctx, client.Job{DocumentID: doc.DocumentID, DocumentType: "doclog/json",
				Actions: []client.Action{{Type: "MERGE_PATCH", Scope: "global", Input: map[string]any{fmt.Sprint("k", i): i}}}})
			if err != nil {
				log.Fatal(err)
			}
			accepted[i] = acc
		})
	}
	wg.Wait()
	// Read with the token of the job the executor committed last: the
	// one at the highest index of the document's global stream.
	var last *client.JobStatus
	for _, acc := range accepted {
		st, err := c.WaitJob(ctx, acc.JobID)
		if err != nil {
			log.Fatal(err)
		}
		if last == nil || st.Streams[0].ToIndex > last.Streams[0].ToIndex {
			last = st
		}
	}
	got, err := c.GetDocument(ctx, doc.DocumentID, client.WithConsistencyToken(last.ConsistencyToken))
	if err != nil {
		log.Fatal(err)
	}
	var state map[string]int
	if err := json.Unmarshal(got.Scopes["global"].State, &state); err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(state), state["k0"], state["k9"])
	// Output: 10 0 9
}
