"""children"""
