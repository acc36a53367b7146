package workflows_test

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/workflows"
)

// TestReplayRecordedHistories replays event histories of OrderWorkflow (and
// of PaymentSettleWorkflow) recorded against a real Temporal server
// (testdata/histories/*.json, internal/recordhistories) on the current
// code. A failure is a non-determinism error: workflows of that shape still
// running when this code is deployed would get stuck.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no histories in testdata/histories")
	}
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(workflows.OrderWorkflow, workflow.RegisterOptions{Name: "OrderWorkflow"})
			r.RegisterWorkflowWithOptions(workflows.PaymentSettleWorkflow, workflow.RegisterOptions{Name: workflows.PaymentSettleWorkflowName})
			if err := r.ReplayWorkflowHistoryFromJSONFile(logger, file); err != nil {
				t.Fatalf("replay %s: %v", file, err)
			}
		})
	}
}
