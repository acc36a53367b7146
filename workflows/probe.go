package workflows

import "go.temporal.io/sdk/workflow"

// EngineProbeName is the registered name of EngineProbe.
const EngineProbeName = "SeckillEngineProbe"

// EngineProbe does nothing: it completes in its first workflow task. The
// order worker runs it on the order task queue, so that N of them started
// from the api's Temporal client, as the relay starts orders, measure what
// the engine and this worker can do at most, in the shape the orders take
// (docs/design.md §4.9, "The engine's ceiling").
func EngineProbe(workflow.Context) error { return nil }
