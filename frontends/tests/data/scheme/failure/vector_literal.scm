;; error: P004 at 2:1
#(1 2 3)
