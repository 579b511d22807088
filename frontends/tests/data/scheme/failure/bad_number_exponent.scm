;; error: P003 at 2:1
1e
