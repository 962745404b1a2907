package adapter

// Kilo Code (checked against 7.7.7, see testdata/FLAGS.md), an opencode
// fork with opencode's command line, config and JSON events:
//
//	kilo run --format json [-m PROVIDER/MODEL] [args…] [--auto] -- PROMPT
//
// The model endpoint is the user's: a provider in their kilo config
// (~/.config/kilo/kilo.json, or a file named by KILO_CONFIG). nerve adds,
// for the turn, its MCP server and the posture's permissions in
// KILO_CONFIG_CONTENT, which kilo merges over every other config; a
// command that would ask ends a headless run, so the posture allows or
// denies everything up front. Kilo's tool names are opencode's
// (nerve_thread_messages).

// kiloEnv turns off its telemetry (PostHog, which otherwise holds the
// exit 2 s when unreachable); the update check is KILO_DISABLE_AUTOUPDATE.
var kiloEnv = []string{"KILO_TELEMETRY_LEVEL=off"}

func buildKilo(a *cliAdapter, req Request) (*invocation, error) {
	inv, err := buildOpencodeLike(a, req, "KILO", "kilo")
	if err != nil {
		return nil, err
	}
	inv.env = append(inv.env, kiloEnv...)
	return inv, nil
}
