package reflex

import (
	"errors"
	"os"
	"slices"
	"strings"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/config"
)

// Mask is what a configured secret's value becomes in what nerve keeps.
const Mask = "***"

// minSecretLen: shorter values are not masked; "***" in place of every
// "ab" would wreck an answer and hide nothing worth hiding.
const minSecretLen = 4

// SecretMasker replaces the value of each of nerve.yaml's sandbox.secrets
// (read from the daemon's environment now) with Mask, longest first so a
// secret holding another is masked whole. Nil when there is none to mask.
func SecretMasker(cfg *config.Config) *strings.Replacer {
	var vals []string
	for _, s := range cfg.Sandbox.Secrets {
		if v := os.Getenv(s.Env); len(v) >= minSecretLen && !slices.Contains(vals, v) {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return nil
	}
	slices.SortFunc(vals, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(vals))
	for _, v := range vals {
		pairs = append(pairs, v, Mask)
	}
	return strings.NewReplacer(pairs...)
}

// maskOutput masks the secrets in what the adapter brought back, before
// anything of it is used: the answer (and so its meta, its commit's
// subject, the stored message), and a failure's reason and stderr tail
// (the message's error, the logs, the trace). This is the one way a CLI's
// output enters nerve.
func maskOutput(cfg *config.Config, res *adapter.Result, err error) (*adapter.Result, error) {
	r := SecretMasker(cfg)
	if r == nil {
		return res, err
	}
	if res != nil {
		c := *res
		c.Content = r.Replace(c.Content)
		res = &c
	}
	var ae *adapter.Error
	if errors.As(err, &ae) {
		c := *ae
		c.Reason, c.Hint = r.Replace(c.Reason), r.Replace(c.Hint)
		c.StderrTail = make([]string, len(ae.StderrTail))
		for i, l := range ae.StderrTail {
			c.StderrTail[i] = r.Replace(l)
		}
		if c.Err != nil {
			c.Err = maskedErr{msg: r.Replace(c.Err.Error()), err: c.Err}
		}
		return res, &c
	}
	if err != nil {
		return res, maskedErr{msg: r.Replace(err.Error()), err: err}
	}
	return res, nil
}

// maskedErr is an error with its text masked; errors.Is and As still see
// the original.
type maskedErr struct {
	msg string
	err error
}

func (e maskedErr) Error() string { return e.msg }
func (e maskedErr) Unwrap() error { return e.err }
