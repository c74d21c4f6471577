package actors

// SetStoppingHook makes every group actor of c that stops call hook before
// it tells the observer the group is gone, for the tests outside the
// package. Set it while no group actor stops.
func SetStoppingHook(c *Coordinator, hook func(prefix, group string)) {
	c.env.testHooks.stopping = hook
}
