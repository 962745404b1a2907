-- Reserved: another branch (cloud merge) adds migration 004. This file only
-- keeps the numbers of this branch without a gap; delete it when that
-- branch's 004 is merged. It changes nothing.
SELECT 1;
