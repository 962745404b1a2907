// Package sense turns the outside world into signals for the daemon's
// reflexes: the khala sense long-polls a remote's turn queue (claiming only
// into free capacity, and nothing while the gate holds its reflex's
// adapter back: a daily cap reached, a pause after rate limits), the
// interval sense ticks, the file sense watches
// paths. Every loop blocks only in a select that includes ctx.Done(), backs
// off with jitter on errors and logs state changes, not ticks.
package sense
