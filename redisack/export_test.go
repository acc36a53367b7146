package redisack

// Verdict and Decide expose the fence's rule to its tests.
type Verdict = verdict

func Decide(all []verdict, need int) error { return decide(all, need) }
