package api

// Merge is a merge turn's work (its Role is MergeRole): merge the round's
// commits into the thread branch in step order, starting from From (the
// head the round's turns started from), and push the branch with a lease
// on the head found there. Its answer (Response) carries the branch's new
// head in Commit and, on a conflict, Error {kind: "merge", message: the
// files} and the conflicting Step; a refused push or any other failure is
// Error {kind: "workspace"}.
type Merge struct {
	From  string      `json:"from"`
	Turns []MergeTurn `json:"turns"`
}

// MergeTurn is one parallel turn's commit, kept under its turn ref.
type MergeTurn struct {
	Step   int    `json:"step"`
	Commit string `json:"commit"`
}

// MergeRole is the reserved role of a merge turn (khaladb.MergeRole).
const MergeRole = "nerve.merge"

// MergeStepBase numbers merge turns (khaladb.MergeStepBase): the merge of
// the round whose last step is S is step MergeStepBase+S.
const MergeStepBase = 1 << 30
