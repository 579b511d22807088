;; error: P005 at 2:1
