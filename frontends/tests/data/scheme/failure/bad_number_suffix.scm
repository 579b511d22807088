;; error: P003 at 2:4
(* 12abc x)
