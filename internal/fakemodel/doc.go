// Package fakemodel is a model endpoint on loopback for tests that run
// the real agent CLIs (../shared/CLIS.md says what each one calls), and
// how to point each CLI at it, offline and away from the machine's own
// configuration.
package fakemodel
