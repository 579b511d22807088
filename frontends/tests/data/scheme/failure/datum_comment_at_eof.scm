;; error: P006 at 2:1
#;