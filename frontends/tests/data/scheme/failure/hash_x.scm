;; error: P004 at 2:6
(+ 1 #x1F)
