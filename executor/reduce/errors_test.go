package reduce

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

func TestFailureClassification(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		name string
		typ  record.ErrorType
	}{
		{&model.InvalidInput{Reason: "x"}, model.NameInvalidInput, record.ErrInvalidAction},
		{&model.UnknownActionType{DocumentType: "t"}, model.NameUnknownActionType, record.ErrInvalidAction},
		{fmt.Errorf("waited: %w", &model.ModelNotFound{DocumentType: "t"}), model.NameModelNotFound, record.ErrUnknownDocumentType},
		{&model.DocumentNotFound{}, model.NameDocumentNotFound, record.ErrDocumentNotFound},
		{&model.DocumentExists{}, model.NameDocumentExists, record.ErrDocumentExists},
		{&model.DocumentDeleted{}, model.NameDocumentDeleted, record.ErrDocumentDeleted},
		{model.Violation("overdraft", "no"), model.NameBusinessRuleViolation, record.ErrReducer},
		{&model.ReducerError{Err: errors.New("bad")}, model.NameReducerError, record.ErrReducer},
		{&model.ReducerError{Panic: true, Err: errors.New("boom")}, model.NameReducerError, record.ErrReducerPanic},
		{&DependencyFailedError{Dependency: "j"}, NameDependencyFailed, record.ErrDependencyFailed},
		{&JobTimeoutError{Reason: "r"}, NameJobTimeout, record.ErrTimeout},
		{&ConflictBudgetExhaustedError{Conflicts: 3, Last: &oplog.RevisionMismatch{}}, NameConflictBudgetExhausted, record.ErrConflictBudgetExhausted},
		{&RetriesExhaustedError{Attempts: 3, Last: errors.New("flaky")}, NameRetriesExhausted, record.ErrRetriesExhausted},
		{&DocumentTypeMismatchError{}, NameDocumentTypeMismatch, record.ErrInvalidAction},
		{errors.New("plain"), NameError, record.ErrUnclassified},
	} {
		info := ErrorInfo(tc.err)
		require.Equal(t, tc.name, info.Name, "%v", tc.err)
		require.Equal(t, tc.err.Error(), info.Message)
		require.Equal(t, tc.typ, FailureType(info), "%v", tc.err)
	}
	// An operator's cancellation is written by doclogctl, not by an error
	// of the executor's: its name alone classifies it.
	require.Equal(t, record.ErrCancelled, FailureType(oplog.ErrorInfo{Name: NameCancelled, Message: "cancelled by an operator"}))
	// Causes keep their names across the boundary.
	info := ErrorInfo(&RetriesExhaustedError{Attempts: 2, Last: &model.HashMismatch{}})
	require.NotNil(t, info.Cause)
	require.Equal(t, model.NameHashMismatch, info.Cause.Name)
}
