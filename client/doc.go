// Package client is the Go client of doclog's two HTTP APIs: the ingest API,
// where producers submit jobs and follow their status, and the read store,
// where readers query the projections and the operation log and follow the
// change feed.
//
// It owns the wire side of read-your-writes: a submit carries an
// Idempotency-Key that every retry reuses, so a retried submit is the same
// job; WaitJob long-polls the job until the executor committed it; and every
// read takes the job's consistency token, so the read store answers only once
// the projection serving the read has applied the write.
//
//	c, err := client.New(client.Config{IngestURL: in, ReadstoreURL: rs, Token: tok})
//	acc, err := c.CreateDocument(ctx, client.CreateDocument{DocumentType: "doclog/json", Name: "report"})
//	st, err := c.WaitJob(ctx, acc.JobID)
//	doc, err := c.GetDocument(ctx, acc.DocumentID, client.WithConsistencyToken(st.ConsistencyToken))
//
// A producer of many small jobs pays most for a request per job: SubmitJobs
// sends a batch in one request, and a Batcher gathers the jobs that many
// goroutines submit one at a time into such requests while its earlier ones
// are in flight.
//
// Failures are typed: an answer of the server is an *APIError (errors.As),
// with helpers such as IsNotFound; a job that failed is a *JobFailedError
// with the job's error history. The package depends on the standard library
// and github.com/google/uuid only, so importing it pulls in none of doclog's
// server code. Its request and response types mirror the APIs' OpenAPI
// documents (ingest/openapi.yaml, readstore/openapi.yaml).
package client
