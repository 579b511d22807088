;; error: P005 at 4:1
#| a block comment |#
#;(a datum comment)
