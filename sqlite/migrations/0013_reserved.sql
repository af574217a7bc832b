-- Reserved for the OIDC sign-in work, which takes this number; this empty
-- migration only keeps the numbers contiguous on the quorum branch. Delete
-- it when that work's migration of this number is merged.
SELECT 1;
