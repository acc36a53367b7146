package workflows

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/converter"
)

// TestReplayHistoriesRecordEveryChange checks that each workflow.GetVersion
// change id below has its version marker in at least one recorded history
// (testdata/histories), so that TestReplayRecordedHistories replays the
// path the change gates: without one, a later change that broke that path
// for workflows open at the deploy would pass. A change id's history is
// recorded by its scenario in internal/recordhistories (which fails when
// the marker is missing); deleting that file fails this test.
func TestReplayHistoriesRecordEveryChange(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string][]string{} // change id → files
	for _, file := range files {
		for _, id := range versionMarkers(t, file) {
			recorded[id] = append(recorded[id], filepath.Base(file))
		}
	}
	for _, change := range []string{VersionUpdates, changeFree, changeEarlierRuns, SettleUnknownOrder} {
		if len(recorded[change]) == 0 {
			t.Errorf("no history in testdata/histories records the version marker of change %q: record one with internal/recordhistories (README, \"Changing the workflow\")", change)
		}
	}
}

// versionMarkers returns the change ids of the version markers
// (workflow.GetVersion's, marker name "Version") in a recorded history.
func versionMarkers(t *testing.T, file string) []string {
	t.Helper()
	bs, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var h historypb.History
	if err := (temporalproto.CustomJSONUnmarshalOptions{}).Unmarshal(bs, &h); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var ids []string
	for _, ev := range h.GetEvents() {
		m := ev.GetMarkerRecordedEventAttributes()
		if m == nil || m.GetMarkerName() != "Version" {
			continue
		}
		var id string
		if err := converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["change-id"], &id); err != nil {
			t.Fatalf("%s: version marker of event %d: %v", file, ev.GetEventId(), err)
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}
